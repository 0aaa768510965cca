package kerong

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Transports.
const (
	TransportSerial = "serial"
	TransportTCP    = "tcp"
)

// Kind is what a layout names as a Kerong CU16 controller's kind, KindCU48 a CU48
// controller's; a controller's URL names the same model (model=cu48 for KindCU48).
const (
	Kind     = "kerong-cu16"
	KindCU48 = "kerong-cu48"
)

// KindOf is the layout kind of a model's controllers.
func KindOf(m Model) string { return "kerong-" + string(m) }

// IsKind reports whether kind names a Kerong controller.
func IsKind(kind string) bool { return kind == Kind || kind == KindCU48 }

// Defaults of a controller URL's parameters.
const (
	DefaultBaud         = 19200
	DefaultFrameTimeout = 300 * time.Millisecond
	DefaultOpenTimeout  = 2 * time.Second
	DefaultRereads      = 2
	DefaultLateAnswer   = 30 * time.Second
)

// Settings are what a controller URL says:
//
//	kerong+serial:///dev/ttyUSB0?baud=19200&board=1
//	kerong+tcp://192.168.1.50:5000?board=1,2
//
// Parameters: board (the board addresses of the bank, 0–15 for CU16 boards and 0–9 for
// CU48 boards, comma-separated: channels 1–16 (1–48 on CU48 boards) are the locks of
// the first, the next 16 (48) of the second, and so on; required), baud (serial only;
// default 19200), model (cu16, the default, or cu48: one model per bus),
// timeout (per-frame answer timeout of a read, default 300ms), opentimeout (how long
// an unlock's answer is awaited, and a read's when the board owes answers to earlier
// frames, default 2s), rereads (how many times a read whose answer was missing or
// corrupt is asked again, default 2), late (how long a board may still answer a frame
// the driver had to give up on, when more than 15 go unanswered: until then the
// board's answers are not trusted; on CU48 boards, how long a board that owes an
// answer is sent nothing: ordered.go; default 30s).
type Settings struct {
	Transport string // serial or tcp
	// Port is the serial device (serial) or host:port (tcp).
	Port         string
	Baud         int
	Model        Model
	Boards       []int
	FrameTimeout time.Duration
	OpenTimeout  time.Duration
	Rereads      int
	LateAnswer   time.Duration
}

// IsControllerURL reports whether s names a Kerong controller (kerong+serial:// or
// kerong+tcp://).
func IsControllerURL(s string) bool {
	return strings.HasPrefix(s, "kerong+serial://") || strings.HasPrefix(s, "kerong+tcp://")
}

// ParseURL reads a controller URL.
func ParseURL(raw string) (Settings, error) {
	s := Settings{Baud: DefaultBaud, Model: ModelCU16, FrameTimeout: DefaultFrameTimeout,
		OpenTimeout: DefaultOpenTimeout, Rereads: DefaultRereads, LateAnswer: DefaultLateAnswer}
	u, err := url.Parse(raw)
	if err != nil {
		return s, fmt.Errorf("kerong controller URL: %w", err)
	}
	switch u.Scheme {
	case "kerong+serial":
		s.Transport = TransportSerial
		if u.Host != "" || u.Path == "" {
			return s, fmt.Errorf("kerong controller URL %q: want kerong+serial:///dev/<port>", raw)
		}
		s.Port = u.Path
	case "kerong+tcp":
		s.Transport = TransportTCP
		if _, _, err := net.SplitHostPort(u.Host); err != nil || u.Path != "" {
			return s, fmt.Errorf("kerong controller URL %q: want kerong+tcp://<host>:<port>", raw)
		}
		s.Port = u.Host
	default:
		return s, fmt.Errorf("kerong controller URL %q: scheme must be kerong+serial or kerong+tcp", raw)
	}
	q := u.Query()
	var errs []error
	for k := range q {
		switch k {
		case "board", "baud", "model", "timeout", "opentimeout", "rereads", "late":
		default:
			errs = append(errs, fmt.Errorf("unknown parameter %q", k))
		}
	}
	if v := q.Get("baud"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1200 || n > 921600 {
			errs = append(errs, fmt.Errorf("baud %q: want a rate between 1200 and 921600", v))
		}
		s.Baud = n
	}
	if v := q.Get("model"); v != "" {
		m := Model(strings.ToLower(v))
		if _, err := CodecOf(m); err != nil {
			errs = append(errs, err)
		} else {
			s.Model = m
		}
	}
	maxBoard := s.codec().MaxBoard()
	dur := func(name string, p *time.Duration) {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > time.Minute {
				errs = append(errs, fmt.Errorf("%s %q: want a duration between 0 and 1m", name, v))
			}
			*p = d
		}
	}
	dur("timeout", &s.FrameTimeout)
	dur("opentimeout", &s.OpenTimeout)
	dur("late", &s.LateAnswer)
	if v := q.Get("rereads"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 10 {
			errs = append(errs, fmt.Errorf("rereads %q: want 0 to 10", v))
		}
		s.Rereads = n
	}
	seen := map[int]bool{}
	for _, f := range strings.Split(q.Get("board"), ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > maxBoard || seen[n] {
			errs = append(errs, fmt.Errorf("board %q: want distinct addresses 0 to %d (%s)", f, maxBoard, s.Model))
			continue
		}
		seen[n] = true
		s.Boards = append(s.Boards, n)
	}
	if len(s.Boards) == 0 && q.Get("board") == "" {
		errs = append(errs, errors.New("board is required (the bank's board addresses, e.g. board=1 or board=1,2)"))
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("kerong controller URL %q: %w", raw, err)
	}
	return s, nil
}

// busKey names the bus a controller talks on: banks on the same port share it.
func (s Settings) busKey() string { return s.Transport + ":" + s.Port }

// codec is the model's codec (cu16 for a Settings not from ParseURL).
func (s Settings) codec() Codec {
	if c, err := CodecOf(s.Model); err == nil {
		return c
	}
	return CU16
}

// Channels is how many channels the controller drives.
func (s Settings) Channels() int { return s.codec().Locks() * len(s.Boards) }

// locate maps a channel (1-based) to a board address and lock number (1–16, or
// 1–48 on CU48 boards).
func (s Settings) locate(channel int) (board, lock int, ok bool) {
	if channel < 1 || channel > s.Channels() {
		return 0, 0, false
	}
	n := s.codec().Locks()
	return s.Boards[(channel-1)/n], (channel-1)%n + 1, true
}
