// The update program of test/helpers/sdk-updates.ts (its protocol is described there), with the Go SDK.
//
//	update <keywarden.json> <license key> <hwid> <dir>
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"

	"keywarden"
)

func say(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func main() {
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "failed:", err)
		os.Exit(1)
	}
}

func run(config, key, hwid, dir string) error {
	ctx := context.Background()
	tamper := map[string]string{}
	if t := os.Getenv("KW_DL_TAMPER_URLS"); t != "" {
		if err := json.Unmarshal([]byte(t), &tamper); err != nil {
			return err
		}
	}
	c, err := keywarden.FromConfig(config)
	if err != nil {
		return err
	}
	if _, err := c.Init(ctx); err != nil {
		return err
	}
	if _, err := c.ActivateLicense(ctx, key, hwid); err != nil {
		return err
	}
	none, err := c.CheckUpdate(ctx, "1.1.0", "stable", "linux", "x64")
	if err != nil {
		return err
	}
	var upgrade any
	if none != nil {
		upgrade = none.Version
	}
	say(map[string]any{"step": "none", "upgrade": upgrade})
	offer, err := c.CheckUpdate(ctx, "1.0.0", "stable", "linux", "x64")
	if err != nil || offer == nil {
		return fmt.Errorf("no offer for 1.0.0: %v", err)
	}
	listed := []any{}
	for _, a := range offer.Artifacts {
		listed = append(listed, map[string]any{"filename": a.Filename, "platform": a.Platform, "arch": a.Arch, "size": a.Size})
	}
	say(map[string]any{"step": "offer", "version": offer.Version, "channel": offer.Channel, "artifacts": listed})
	art := offer.Artifacts[0]
	var seen [][2]int64
	written, err := c.DownloadUpdate(ctx, art, filepath.Join(dir, "app.bin"), func(got, total int64) { seen = append(seen, [2]int64{got, total}) })
	if err != nil {
		return err
	}
	monotonic := true
	for i := 1; i < len(seen); i++ {
		monotonic = monotonic && seen[i][0] > seen[i-1][0]
	}
	say(map[string]any{"step": "download", "path": written, "calls": len(seen), "last": seen[len(seen)-1], "monotonic": monotonic})
	modes := []string{}
	for m := range tamper {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	for _, mode := range modes {
		d := filepath.Join(dir, mode)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		u, _ := url.Parse(art.URL)
		spoiled := art
		spoiled.URL = tamper[mode] + u.RequestURI()
		_, err := c.DownloadUpdate(ctx, spoiled, filepath.Join(d, "app.bin"), nil)
		var ue *keywarden.UpdateError
		if !errors.As(err, &ue) {
			say(map[string]any{"step": "tamper", "mode": mode, "error": fmt.Sprint(err)})
			continue
		}
		files := []string{}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			files = append(files, e.Name())
		}
		say(map[string]any{"step": "tamper", "mode": mode, "error": "UpdateError", "reason": ue.Reason, "code": string(ue.Code), "files": files})
	}
	return nil
}
