package apply

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// A journal step names paths, and a path is bytes (invariant 14): JSON
// strings hold only UTF-8, so a step whose paths are not UTF-8 keeps them
// in base64 too, and reading takes the bytes. Without it a restart would
// finish an apply, or an undo would look for a file, under another name.

type plainStep Step

type stepJSON struct {
	plainStep
	B64 *stepPaths `json:"b64,omitempty"`
}

// stepPaths are a step's paths as bytes, in base64.
type stepPaths struct {
	Path  string   `json:"path"`
	Temp  string   `json:"temp,omitempty"`
	Dirs  []string `json:"dirs,omitempty"`
	Gone  []string `json:"gone,omitempty"`
	Prune []string `json:"prune,omitempty"`
}

func (s Step) MarshalJSON() ([]byte, error) {
	v := stepJSON{plainStep: plainStep(s)}
	all := append(append(append([]string{s.Path, s.Temp}, s.Dirs...), s.Gone...), s.Prune...)
	for _, p := range all {
		if !utf8.ValidString(p) {
			enc := func(ss []string) []string {
				var out []string
				for _, x := range ss {
					out = append(out, base64.StdEncoding.EncodeToString([]byte(x)))
				}
				return out
			}
			v.B64 = &stepPaths{Path: enc([]string{s.Path})[0], Temp: enc([]string{s.Temp})[0], Dirs: enc(s.Dirs), Gone: enc(s.Gone), Prune: enc(s.Prune)}
			break
		}
	}
	return json.Marshal(v)
}

func (s *Step) UnmarshalJSON(b []byte) error {
	var v stepJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Step(v.plainStep)
	if v.B64 == nil {
		return nil
	}
	dec := func(x string) (string, error) {
		d, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			return "", fmt.Errorf("journal step: %w", err)
		}
		return string(d), nil
	}
	decAll := func(xs []string) ([]string, error) {
		var out []string
		for _, x := range xs {
			d, err := dec(x)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	}
	var err error
	if s.Path, err = dec(v.B64.Path); err != nil {
		return err
	}
	if s.Temp, err = dec(v.B64.Temp); err != nil {
		return err
	}
	if s.Dirs, err = decAll(v.B64.Dirs); err != nil {
		return err
	}
	if s.Gone, err = decAll(v.B64.Gone); err != nil {
		return err
	}
	s.Prune, err = decAll(v.B64.Prune)
	return err
}
