package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// csrfLifetime is how long a form's token is accepted.
const csrfLifetime = time.Hour

// csrf makes and checks the tokens of the page's forms: the time the
// form was rendered and an HMAC of it under the handler's key. A page of
// another origin cannot read a token (the same-origin policy), so it
// cannot forge the POST; CrossOriginProtection refuses such a POST first
// in the browsers that send Sec-Fetch-Site or Origin.
type csrf struct{ key []byte }

// token is a token issued at now.
func (c csrf) token(now time.Time) string {
	issued := strconv.FormatInt(now.Unix(), 10)
	return issued + "." + c.mac(issued)
}

// valid reports whether token was issued by c within csrfLifetime of
// now (one token serves every form of a page).
func (c csrf) valid(token string, now time.Time) bool {
	issued, mac, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(c.mac(issued))) {
		return false
	}
	unix, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(unix, 0))
	return age >= -time.Minute && age <= csrfLifetime
}

func (c csrf) mac(issued string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("idem-admin-csrf-v1|" + issued))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
