package main

import "slices"

func slicesSort(s []string) { slices.Sort(s) }
