// Command activate activates a license key and keeps a heartbeat running.
//
//	go run ./examples/activate <license-key> [path/to/keywarden.json] [-beats N] [-base-url URL]
//
// keywarden.json is looked up as: the path given, ./keywarden.json, then the SDK folder's. -beats
// defaults to 3 (0: beat until Ctrl-C). Exit code 0 on success, 1 with the error code otherwise, 2 on
// bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"keywarden"
)

func findConfig(given string) string {
	if given != "" {
		return given
	}
	for _, c := range []string{"keywarden.json", "../keywarden.json", "../../keywarden.json"} {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return "keywarden.json"
}

func main() { os.Exit(run()) }

func run() int {
	beats := flag.Int("beats", 3, "stop after N verified beats (0: until Ctrl-C)")
	baseURL := flag.String("base-url", "", "overrides base_url of keywarden.json")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: activate [-beats N] [-base-url URL] <license-key> [keywarden.json]")
		flag.PrintDefaults()
	}
	// Flags may follow the positional arguments too.
	var positional []string
	args := os.Args[1:]
	for len(args) > 0 {
		if err := flag.CommandLine.Parse(args); err != nil {
			return 2
		}
		args = flag.Args()
		if len(args) > 0 {
			positional = append(positional, args[0])
			args = args[1:]
		}
	}
	if len(positional) < 1 || len(positional) > 2 {
		flag.Usage()
		return 2
	}
	configPath := ""
	if len(positional) == 2 {
		configPath = positional[1]
	}
	var opts []keywarden.Option
	if *baseURL != "" {
		opts = append(opts, keywarden.WithBaseURL(*baseURL))
	}
	client, err := keywarden.FromConfig(findConfig(configPath), opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed: %v\n", err)
		return 2
	}
	ctx := context.Background()
	fail := func(err error) int {
		var e *keywarden.Error
		if !errors.As(err, &e) {
			fmt.Fprintf(os.Stderr, "failed: %v\n", err)
			return 1
		}
		reason := ""
		if e.Reason != "" {
			reason = " (" + e.Reason + ")"
		}
		fmt.Fprintf(os.Stderr, "failed: %s%s: %v\n", e.Code, reason, e)
		if e.Code == keywarden.CodeUpdateRequired {
			fmt.Fprintf(os.Stderr, "download %s from %s\n", e.LatestVersion, e.UpdateURL)
		}
		if e.RetryAfter >= 0 {
			fmt.Fprintf(os.Stderr, "retry after %v s\n", e.RetryAfter)
		}
		return 1
	}
	app, err := client.Init(ctx)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("connected to %s (version %s)\n", app.Name, app.Version)
	lic, err := client.ActivateLicense(ctx, positional[0], "")
	if err != nil {
		return fail(err)
	}
	expires := "never"
	if lic.ExpiresAt != nil {
		expires = lic.ExpiresAt.Format(time.RFC3339)
	}
	fmt.Printf("license ok: level %d, expires %s\n", lic.Level, expires)

	// A short interval when a beat count is asked for, so the demo finishes quickly (beating faster
	// than the server's interval is allowed; only late beats count as drift).
	interval := time.Duration(0)
	if *beats > 0 {
		interval = time.Second
	}
	hb, err := client.PrepareHeartbeat(ctx, keywarden.HeartbeatOptions{Reauth: true, Interval: interval})
	if err != nil {
		return fail(err)
	}
	fmt.Printf("heartbeat started (server interval %d s)\n", hb.BeatInterval())
	code := 0
	hb.On(keywarden.EventBeat, func(e keywarden.Event) {
		fmt.Printf("beat %d verified (count %d)\n", e.Index, e.Count)
		if *beats > 0 && e.Count >= int64(*beats) {
			go hb.Stop()
		}
	})
	hb.On(keywarden.EventDegraded, func(e keywarden.Event) {
		fmt.Fprintf(os.Stderr, "heartbeat degraded: %s %v\n", e.Err.Code, e.Err)
	})
	hb.On(keywarden.EventRecovered, func(keywarden.Event) {
		fmt.Fprintln(os.Stderr, "heartbeat recovered after re-authentication")
	})
	hb.On(keywarden.EventExpired, func(e keywarden.Event) {
		fmt.Fprintf(os.Stderr, "license expired: %v\n", e.Err)
	})
	hb.On(keywarden.EventKilled, func(e keywarden.Event) {
		code = 1
		fmt.Fprintf(os.Stderr, "heartbeat killed: %s %v\n", e.Err.Code, e.Err)
	})
	hb.On(keywarden.EventStopped, func(keywarden.Event) { fmt.Println("heartbeat stopped") })
	hb.Start()
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	select {
	case <-hb.Done():
	case <-interrupt:
		hb.Stop()
		<-hb.Done()
	}
	return code
}
