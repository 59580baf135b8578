package keywarden

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

// ResponseKey is a pinned Ed25519 response-signing key (docs/protocol.md 4).
type ResponseKey struct {
	Kid       string `json:"kid"`
	Alg       string `json:"alg,omitempty"`
	PublicKey string `json:"public_key"` // base64 of the 32-byte public key
}

// Config is keywarden.json, format 1 (sdk/vectors/README.md): what the dashboard's SDK zip carries.
type Config struct {
	Format       int           `json:"format"`
	BaseURL      string        `json:"base_url"`
	AppName      string        `json:"app_name,omitempty"`
	APIKey       string        `json:"api_key"`
	Version      string        `json:"version,omitempty"`
	ResponseKeys []ResponseKey `json:"response_keys"`
	// AppID is the application's id: an offline license file must name it (docs/protocol.md 12.5).
	AppID string `json:"app_id,omitempty"`
	// APISecret is present only when the application requires signed requests.
	APISecret string `json:"api_secret,omitempty"`
}

// String never shows the api_secret (a debug print of the config must not leak it).
func (c Config) String() string {
	return fmt.Sprintf("keywarden.Config{base_url=%q, app_name=%q, app_id=%q, signed=%t}", c.BaseURL, c.AppName, c.AppID, c.APISecret != "")
}

// ConfigError: keywarden.json (or an option) is unusable. A programming mistake, not a runtime outcome.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "keywarden config: " + e.Msg }

func configErr(format string, a ...any) error { return &ConfigError{Msg: fmt.Sprintf(format, a...)} }

var baseURLPattern = regexp.MustCompile(`^https?://[^/\s]`)

// ParseConfig checks the bytes of a keywarden.json; unknown fields are ignored (later formats add fields).
func ParseConfig(data []byte) (*Config, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, configErr("not a JSON object")
	}
	str := func(name string, required bool) (string, error) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			if required {
				return "", configErr("%s missing", name)
			}
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", configErr("%s must be a string", name)
		}
		return s, nil
	}
	var format json.Number
	if v, ok := raw["format"]; !ok || json.Unmarshal(v, &format) != nil || format.String() != "1" {
		return nil, configErr("unsupported format %s (this SDK reads format 1)", string(raw["format"]))
	}
	c := &Config{Format: 1}
	var err error
	if c.BaseURL, err = str("base_url", true); err != nil || !baseURLPattern.MatchString(c.BaseURL) {
		return nil, configErr("base_url must be an http(s) URL")
	}
	if c.APIKey, err = str("api_key", true); err != nil || c.APIKey == "" {
		return nil, configErr("api_key missing")
	}
	if c.Version, err = str("version", false); err != nil {
		return nil, err
	}
	if c.APISecret, err = str("api_secret", false); err != nil {
		return nil, err
	}
	c.AppName, _ = str("app_name", false)
	if v, ok := raw["app_id"]; ok && string(v) != "null" {
		if c.AppID, err = str("app_id", false); err != nil || c.AppID == "" {
			return nil, configErr("app_id must be a non-empty string")
		}
	}
	var keys []map[string]any
	if v, ok := raw["response_keys"]; !ok || json.Unmarshal(v, &keys) != nil || len(keys) == 0 {
		return nil, configErr("response_keys must list at least one key")
	}
	for _, k := range keys {
		kid, _ := k["kid"].(string)
		if kid == "" {
			return nil, configErr("a response key has no kid")
		}
		if alg, ok := k["alg"]; ok && alg != nil && alg != "Ed25519" {
			return nil, configErr("key %s: unsupported alg %v", kid, alg)
		}
		pk, _ := k["public_key"].(string)
		if b, err := base64.StdEncoding.Strict().DecodeString(pk); err != nil || len(b) != 32 {
			return nil, configErr("key %s: public_key must be base64 of 32 bytes", kid)
		}
		c.ResponseKeys = append(c.ResponseKeys, ResponseKey{Kid: kid, Alg: "Ed25519", PublicKey: pk})
	}
	return c, nil
}

// LoadConfig reads and checks a keywarden.json file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, configErr("cannot read %s: %v", path, err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, configErr("%s: %s", path, err.(*ConfigError).Msg)
	}
	return c, nil
}
