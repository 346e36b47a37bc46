package web

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

const (
	robotsMaxBytes = 512 << 10
	robotsTTL      = time.Hour
	robotsEntries  = 1024
)

// robotsRules are the Allow and Disallow lines of the group that applies
// to toolgate, per RFC 9309.
type robotsRules struct {
	allow, disallow []string
	// all: the file could not be read (5xx, unreachable): everything is
	// disallowed, as the RFC asks.
	all bool
}

type robotsEntry struct {
	rules   robotsRules
	expires time.Time
}

// robotsCache keeps each site's rules for robotsTTL, so the pages of one
// call cost one robots.txt read per site.
type robotsCache struct {
	mu      sync.Mutex
	entries map[string]robotsEntry
}

func newRobotsCache() *robotsCache { return &robotsCache{entries: map[string]robotsEntry{}} }

// robotsAllow reads (or recalls) the robots.txt of u's site and refuses
// a path it disallows.
func (f *Fetcher) robotsAllow(ctx context.Context, u *url.URL) error {
	site := u.Scheme + "://" + u.Host
	f.robots.mu.Lock()
	e, ok := f.robots.entries[site]
	f.robots.mu.Unlock()
	if !ok || time.Now().After(e.expires) {
		rules, err := f.readRobots(ctx, site)
		if err != nil {
			// The site could not be reached, or a rule refused it: that
			// is the page's failure too, and nothing is remembered.
			return err
		}
		e = robotsEntry{rules: rules, expires: time.Now().Add(robotsTTL)}
		f.robots.mu.Lock()
		if len(f.robots.entries) >= robotsEntries {
			clear(f.robots.entries)
		}
		f.robots.entries[site] = e
		f.robots.mu.Unlock()
	}
	if e.rules.all {
		return &PageError{Kind: KindOutage, Msg: fmt.Sprintf("%s: the site's robots.txt could not be read, so no page of it is read", u)}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if !e.rules.allows(path) {
		return &Refused{Rule: "robots.txt", Reason: fmt.Sprintf("%s disallows %s for %s", site+"/robots.txt", path, robotsToken)}
	}
	return nil
}

// readRobots reads a site's rules. A 4xx allows everything; a 5xx or a
// body that cannot be read disallows everything (RFC 9309); a site that
// cannot be reached, or answers 502, 503 or 504, is an error, not a rule,
// so the read is tried again as the page itself would be.
func (f *Fetcher) readRobots(ctx context.Context, site string) (robotsRules, error) {
	u, err := url.Parse(site + "/robots.txt")
	if err != nil {
		return robotsRules{}, &Refused{Rule: "http and https only", Reason: "bad site address"}
	}
	doc, err := f.get(ctx, u, robotsMaxBytes, nil)
	var (
		status *statusError
		cerr   *contentError
	)
	switch {
	case errors.As(err, &status) && status.code >= 500 && passing(status.code):
		// The site asks to be tried again: the page read is, and this
		// answer is not remembered as the site's rules.
		return robotsRules{}, err
	case errors.As(err, &status) && status.code >= 400 && status.code < 500:
		return robotsRules{}, nil
	case errors.As(err, &status) || errors.As(err, &cerr):
		return robotsRules{all: true}, nil
	case err != nil:
		return robotsRules{}, err
	}
	return parseRobots(doc.Body, robotsToken), nil
}

// parseRobots returns the rules of the group naming token, or of "*" when
// none does.
func parseRobots(body []byte, token string) robotsRules {
	var (
		mine, star robotsRules
		foundMine  bool
		agents     []string
		inRules    bool
		groupMine  bool
		groupStar  bool
	)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), robotsMaxBytes)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		switch key {
		case "user-agent":
			if inRules {
				agents, inRules = nil, false
			}
			agents = append(agents, strings.ToLower(val))
			groupMine, groupStar = false, false
			for _, a := range agents {
				groupMine = groupMine || a == token
				groupStar = groupStar || a == "*"
			}
		case "allow", "disallow":
			inRules = true
			if val == "" {
				continue
			}
			for _, g := range []struct {
				on bool
				r  *robotsRules
			}{{groupMine, &mine}, {groupStar && !groupMine, &star}} {
				if !g.on {
					continue
				}
				if key == "allow" {
					g.r.allow = append(g.r.allow, val)
				} else {
					g.r.disallow = append(g.r.disallow, val)
				}
			}
			foundMine = foundMine || groupMine
		}
	}
	if foundMine {
		return mine
	}
	return star
}

// allows applies the longest matching rule; a tie goes to Allow.
func (r robotsRules) allows(path string) bool {
	best, allowed := -1, true
	for _, p := range r.disallow {
		if robotsMatch(p, path) && len(p) > best {
			best, allowed = len(p), false
		}
	}
	for _, p := range r.allow {
		if robotsMatch(p, path) && len(p) >= best {
			best, allowed = len(p), true
		}
	}
	return allowed
}

// robotsMatch matches a robots.txt path pattern: a prefix, with "*" for
// any run of characters and a final "$" for the end.
func robotsMatch(pattern, path string) bool {
	anchored := strings.HasSuffix(pattern, "$")
	pattern = strings.TrimSuffix(pattern, "$")
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(path, parts[0]) {
		return false
	}
	rest := path[len(parts[0]):]
	for i, part := range parts[1:] {
		last := i == len(parts)-2
		if last && anchored {
			return strings.HasSuffix(rest, part)
		}
		j := strings.Index(rest, part)
		if j < 0 {
			return false
		}
		rest = rest[j+len(part):]
	}
	return !anchored || rest == ""
}
