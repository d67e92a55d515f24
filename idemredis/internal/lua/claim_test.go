package lua

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The claim script unpacks ARGV into locals named as ClaimArgs's fields
// (lower camel case), in the order of Argv: the two lists cannot drift.
func TestClaimArgsNameTheScriptsLocals(t *testing.T) {
	m := regexp.MustCompile(`(?s)\nlocal ([a-zA-Z, \n]+) = unpack\(ARGV\)`).FindStringSubmatch(claim)
	require.NotNil(t, m, "claim.lua unpacks its ARGV into named locals")
	var lua []string
	for _, name := range strings.Split(m[1], ",") {
		lua = append(lua, strings.TrimSpace(name))
	}
	var goNames []string
	typ := reflect.TypeFor[ClaimArgs]()
	for i := range typ.NumField() {
		name := []rune(typ.Field(i).Name)
		name[0] = unicode.ToLower(name[0])
		goNames = append(goNames, string(name))
	}
	assert.Equal(t, goNames, lua, "claim.lua's ARGV locals against ClaimArgs's fields")
	assert.Len(t, ClaimArgs{}.Argv(), len(goNames), "Argv passes every field")
}
