package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lockernet/lockernet/hardware/towersim"
)

func open(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("towersim open", flag.ContinueOnError)
	fs.SetOutput(stderr)
	simURL := fs.String("url", envDefault(getenv, "LOCKERNET_TOWERSIM_URL", "http://127.0.0.1:8070"), "simulator control API (env LOCKERNET_TOWERSIM_URL)")
	tower := fs.String("tower", "", "tower id (16 hex digits)")
	payload := fs.String("payload", "", "the token's payload (hex)")
	auth := fs.String("auth", "", "the token's payload_auth (hex)")
	empty := fs.Bool("empty", false, "close the door empty (default for pickup and release tokens)")
	item := fs.Bool("item", false, "close the door with the item inside (default for drop-off tokens)")
	accessToken := fs.String("access-token", "", "call the cloud with this tower_access token instead of the simulator's own")
	claim := fs.String("claim", "", "the session's claim: sync_packet, locker_pickup, locker_delivery, owner, technician or developer (default developer)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up waiting for the simulator after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	var missing []string
	for name, v := range map[string]string{"-tower": *tower, "-payload": *payload, "-auth": *auth} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	case len(missing) > 0:
		slices.Sort(missing)
		return usageError{fmt.Errorf("required: %s", strings.Join(missing, ", "))}
	case *empty && *item:
		return usageError{errors.New("give -empty or -item, not both")}
	}

	req := towersim.OpenRequest{Payload: strings.TrimSpace(*payload), PayloadAuth: strings.TrimSpace(*auth), AccessToken: *accessToken, Claim: *claim}
	switch {
	case *empty:
		req.CloseWithItem = new(false)
	case *item:
		req.CloseWithItem = new(true)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := towersim.NewControlClient(*simURL, &http.Client{})
	resp, err := client.Open(ctx, *tower, req)
	if err != nil {
		return noAnswerError{fmt.Errorf("open on tower %s: %w", *tower, err)}
	}
	printOutcome(stdout, *tower, resp)
	if !resp.Opened {
		return errRefused
	}
	return nil
}

func printOutcome(w io.Writer, tower string, resp towersim.OpenResponse) {
	if !resp.Opened {
		code := "unknown"
		if resp.Error != nil {
			code = *resp.Error
		}
		fmt.Fprintf(w, "refused: %s", code)
		if resp.ErrorDescription != "" {
			fmt.Fprintf(w, " (%s)", resp.ErrorDescription)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "the door stayed shut; nothing was recorded")
		return
	}
	contents := "empty"
	if resp.ItemInside {
		contents = "with the item inside"
	}
	fmt.Fprintf(w, "opened: tower %s, locker %d (%s token); door closed %s\n", strings.ToLower(tower), resp.LockerID, resp.TokenType, contents)
	if resp.UploadError != "" {
		fmt.Fprintf(w, "events: not uploaded (%s); %d queued for a later upload\n", resp.UploadError, resp.EventsPending)
		return
	}
	fmt.Fprintf(w, "events: %d uploaded, %d queued\n", resp.EventsUploaded, resp.EventsPending)
}
