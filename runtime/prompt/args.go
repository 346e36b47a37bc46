package prompt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ArgumentChars is the most characters of one argument value an earlier
// turn replays, as read_transcript shows them: later turns replay what was
// asked, not the payload (a 240,000-character file once went into every
// later model call).
const ArgumentChars = 400

// Cut is one argument value cut for replay.
type Cut struct {
	// Path is where the value sits, e.g. "files[0].content".
	Path string
	// Chars is how long it was.
	Chars int
}

// CapArguments returns args with every string value longer than
// ArgumentChars cut to its first ArgumentChars characters and "…", keys in
// their order, and what it cut in document order. Arguments with nothing
// to cut, or that are not JSON, come back as they are: the result is
// always JSON the provider accepts as a call's arguments.
func CapArguments(args string) (string, []Cut) {
	if len(args) <= ArgumentChars {
		return args, nil
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	c := capper{dec: dec}
	if err := c.value(""); err != nil {
		return args, nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) || len(c.cuts) == 0 {
		return args, nil
	}
	return c.out.String(), c.cuts
}

type capper struct {
	dec  *json.Decoder
	out  bytes.Buffer
	cuts []Cut
}

// value copies one JSON value at path, cutting long strings.
func (c *capper) value(path string) error {
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			c.out.WriteByte('{')
			for i := 0; c.dec.More(); i++ {
				k, err := c.dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return errors.New("key is not a string")
				}
				if i > 0 {
					c.out.WriteByte(',')
				}
				c.write(key)
				c.out.WriteByte(':')
				p := key
				if path != "" {
					p = path + "." + key
				}
				if err := c.value(p); err != nil {
					return err
				}
			}
			c.out.WriteByte('}')
		case '[':
			c.out.WriteByte('[')
			for i := 0; c.dec.More(); i++ {
				if i > 0 {
					c.out.WriteByte(',')
				}
				if err := c.value(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
			c.out.WriteByte(']')
		default:
			return errors.New("unexpected delimiter")
		}
		// The closing delimiter.
		_, err := c.dec.Token()
		return err
	case string:
		if n := utf8.RuneCountInString(v); n > ArgumentChars {
			c.cuts = append(c.cuts, Cut{Path: path, Chars: n})
			v = string([]rune(v)[:ArgumentChars]) + "…"
		}
		c.write(v)
	default:
		c.write(v)
	}
	return nil
}

func (c *capper) write(v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// The model wrote "<" and "&", not their escapes.
	enc.SetEscapeHTML(false)
	// Strings, numbers, booleans and null always encode.
	_ = enc.Encode(v)
	c.out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
