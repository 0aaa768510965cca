package worker

// NewWorker is Run's worker before anything is registered, for the tests that register
// stand-ins for the activities.
var NewWorker = newWorker
