package gateway

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The admin page is for a technician on site: server-rendered, plain forms, no
// build step. A browser logs in with the gateway secret and gets a session
// cookie (HttpOnly, SameSite=Strict); each form carries the session's CSRF
// token as well.

const sessionCookie = "gw_session"

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"lower": strings.ToLower,
}).ParseFS(templateFS, "templates/*.html"))

type session struct {
	csrf    string
	expires time.Time
	flash   string
	flashOK bool
}

// sessions are in memory: a restart logs technicians out, which is fine.
type sessions struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, m: map[string]*session{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create() (string, *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := time.Now()
	for k, v := range ss.m {
		if now.After(v.expires) {
			delete(ss.m, k)
		}
	}
	token := randomToken()
	sess := &session{csrf: randomToken(), expires: now.Add(ss.ttl)}
	ss.m[token] = sess
	return token, sess
}

// get returns a copy of the live session of that token.
func (ss *sessions) get(token string) (session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sess, ok := ss.m[token]
	if !ok || time.Now().After(sess.expires) {
		delete(ss.m, token)
		return session{}, false
	}
	return *sess, true
}

func (ss *sessions) delete(token string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, token)
}

func (ss *sessions) setFlash(token, msg string, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if sess, found := ss.m[token]; found {
		sess.flash, sess.flashOK = msg, ok
	}
}

func (ss *sessions) takeFlash(token string) (string, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sess, found := ss.m[token]
	if !found {
		return "", false
	}
	msg, ok := sess.flash, sess.flashOK
	sess.flash = ""
	return msg, ok
}

func (s *Server) setSessionCookie(w http.ResponseWriter, token string) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.SessionTTL.Seconds()),
	})
}

// adminSession returns the request's session token, if its cookie is live.
func (s *Server) adminSession(r *http.Request) (string, session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) > 100 {
		return "", session{}, false
	}
	sess, ok := s.sessions.get(c.Value)
	return c.Value, sess, ok
}

func renderHTML(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = templates.ExecuteTemplate(w, name, data)
}

type loginData struct {
	GatewayID string
	Error     string
}

type adminData struct {
	GatewayID    string
	Version      string
	Uptime       string
	Now          string
	CSRF         string
	Flash        string
	FlashOK      bool
	Controllers  []LockController
	Banks        []adminBank
	Transactions []adminTransaction
	Logs         []LogEntry
}

type adminBank struct {
	ID           int
	BankTypeName string
	Controller   LockController
	Lockers      []adminLocker
}

type adminLocker struct {
	Locker
	TypeName string
}

type adminTransaction struct {
	TransactionID string
	LockerID      int
	LockerName    string
	CreatedAt     string
	ReleasedAt    string
}

func (s *Server) adminPage(w http.ResponseWriter, r *http.Request) {
	token, sess, ok := s.adminSession(r)
	if !ok {
		if !s.bearerOK(r) {
			// 401 like every operation without the secret: a JSON client gets
			// the Error body, a browser the login form.
			w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
			if wantsJSON(r) {
				writeError(w, CodeAuthFailed, "missing bearer secret", nil)
				return
			}
			renderHTML(w, http.StatusUnauthorized, "login.html", loginData{GatewayID: s.cfg.GatewayID})
			return
		}
		// A bearer holder gets a session too, so the page's forms work.
		var created *session
		token, created = s.sessions.create()
		sess = *created
		s.setSessionCookie(w, token)
	}
	ctx := r.Context()
	data := adminData{
		GatewayID: s.cfg.GatewayID,
		Version:   s.cfg.Version,
		Uptime:    (time.Duration(s.uptime()) * time.Second).String(),
		Now:       formatTime(time.Now()),
		CSRF:      sess.csrf,
	}
	data.Flash, data.FlashOK = s.sessions.takeFlash(token)
	data.Controllers = s.controllerViews(ctx)
	views, err := s.lockerViews(ctx, true)
	if err != nil {
		s.logger.ErrorContext(ctx, "admin page: lockers", "err", err)
		http.Error(w, "cannot read the gateway database", http.StatusInternalServerError)
		return
	}
	byID := map[int]Locker{}
	for _, v := range views {
		byID[v.LockerID] = v
	}
	for i, b := range s.cfg.Layout.Banks {
		ab := adminBank{ID: b.ID, Controller: data.Controllers[i]}
		if bt := s.bankType(b.BankTypeID); bt != nil {
			ab.BankTypeName = bt.Name
		}
		for _, lk := range b.Lockers {
			al := adminLocker{Locker: byID[lk.LockerID]}
			if lt := s.lockerType(lk.LockerTypeID); lt != nil {
				al.TypeName = lt.Name
			}
			ab.Lockers = append(ab.Lockers, al)
		}
		data.Banks = append(data.Banks, ab)
	}
	txs, err := s.store.recentTransactions(ctx, 20)
	if err != nil {
		s.logger.ErrorContext(ctx, "admin page: transactions", "err", err)
	}
	for _, t := range txs {
		at := adminTransaction{TransactionID: t.ID, LockerID: t.LockerID, CreatedAt: formatTime(t.CreatedAt)}
		if lk, ok := s.lockers[t.LockerID]; ok {
			at.LockerName = lk.Name
		}
		if t.ReleasedAt != nil {
			at.ReleasedAt = formatTime(*t.ReleasedAt)
		}
		data.Transactions = append(data.Transactions, at)
	}
	logs, _, err := s.store.logs(ctx, 30)
	if err != nil {
		s.logger.ErrorContext(ctx, "admin page: logs", "err", err)
	}
	for _, e := range logs {
		data.Logs = append(data.Logs, LogEntry{Timestamp: formatTime(e.Timestamp), Level: e.Level, Message: e.Message, Fields: e.Fields})
	}
	renderHTML(w, http.StatusOK, "admin.html", data)
}

// wantsJSON reports a client that asks for JSON rather than a page.
func wantsJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

func (s *Server) adminLogin(w http.ResponseWriter, r *http.Request) {
	host := clientHost(r.RemoteAddr)
	if wait := s.logins.wait(host, time.Now()); wait > 0 {
		secs := int(wait/time.Second) + 1
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		renderHTML(w, http.StatusTooManyRequests, "login.html", loginData{GatewayID: s.cfg.GatewayID,
			Error: fmt.Sprintf("Too many wrong secrets from this address: try again in %d s.", secs)})
		return
	}
	if err := r.ParseForm(); err != nil {
		renderHTML(w, http.StatusBadRequest, "login.html", loginData{GatewayID: s.cfg.GatewayID, Error: "The form could not be read."})
		return
	}
	if !s.secretMatches(r.PostFormValue("secret")) {
		s.logins.failed(host, time.Now())
		s.event(r.Context(), slog.LevelWarn, "admin login failed", map[string]any{"remoteAddr": r.RemoteAddr, "category": CategorySecurity})
		renderHTML(w, http.StatusUnauthorized, "login.html", loginData{GatewayID: s.cfg.GatewayID, Error: "Wrong secret."})
		return
	}
	token, _ := s.sessions.create()
	s.setSessionCookie(w, token)
	s.event(r.Context(), slog.LevelInfo, "admin login", map[string]any{"remoteAddr": r.RemoteAddr, "category": CategorySecurity})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// adminForm checks the session and the CSRF token of an admin form post. On
// failure it has answered and returns ok=false.
func (s *Server) adminForm(w http.ResponseWriter, r *http.Request) (token string, ok bool) {
	token, sess, live := s.adminSession(r)
	if !live {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return "", false
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read", http.StatusBadRequest)
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(sess.csrf)) != 1 {
		http.Error(w, "this form is stale; reload the page and try again", http.StatusForbidden)
		return "", false
	}
	return token, true
}

func (s *Server) adminLogout(w http.ResponseWriter, r *http.Request) {
	token, ok := s.adminForm(w, r)
	if !ok {
		return
	}
	s.sessions.delete(token)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// adminLockerForm checks an admin form posted about a locker (adminForm) and finds the
// locker of its path; when there is none, it says so on the page. ok is false when the
// answer is written.
func (s *Server) adminLockerForm(w http.ResponseWriter, r *http.Request) (token string, lk lockerInfo, ok bool) {
	if token, ok = s.adminForm(w, r); !ok {
		return "", lk, false
	}
	lk, err := s.pathLocker(r)
	if err != nil {
		s.adminDone(w, r, token, "No such locker.", false)
		return "", lk, false
	}
	return token, lk, true
}

// adminDone ends an admin form's request: the page, shown again, says msg.
func (s *Server) adminDone(w http.ResponseWriter, r *http.Request, token, msg string, ok bool) {
	s.sessions.setFlash(token, msg, ok)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) adminOpen(w http.ResponseWriter, r *http.Request) {
	token, lk, ok := s.adminLockerForm(w, r)
	if !ok {
		return
	}
	if _, err := s.openAndRecord(r.Context(), lk, "admin", nil); err != nil {
		ae, _ := asAPIError(err)
		s.adminDone(w, r, token, "Locker "+lk.Name+" did not open: "+ae.message+" ("+ae.code+").", false)
		return
	}
	s.adminDone(w, r, token, "Locker "+lk.Name+" opened.", true)
}

func (s *Server) adminService(w http.ResponseWriter, r *http.Request) {
	token, lk, ok := s.adminLockerForm(w, r)
	if !ok {
		return
	}
	outOfService := r.PostFormValue("outOfService") == "true"
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	for len(reason) > 500 {
		_, size := utf8.DecodeLastRuneInString(reason)
		reason = reason[:len(reason)-size]
	}
	code := "ADMIN"
	msg, err := s.setService(r.Context(), lk, outOfService, &code, &reason, "admin")
	if err != nil {
		s.logger.ErrorContext(r.Context(), "admin: set service state", "err", err)
		s.adminDone(w, r, token, "Locker "+lk.Name+": the change could not be saved.", false)
		return
	}
	s.adminDone(w, r, token, "Locker "+lk.Name+": "+msg+".", true)
}
