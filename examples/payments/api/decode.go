package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// decodeJSON decodes the request body, one JSON object of the documented
// fields of v (each at most once, named exactly), into v. When it cannot,
// it answers 413 request-too-large for a body over maxBodyBytes, or 400
// invalid-request saying what is wrong in the API's terms, and returns
// false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeProblem(w, http.StatusRequestEntityTooLarge, "request-too-large", "Request body too large",
			fmt.Sprintf("the body is larger than %d bytes", maxBodyBytes))
		return false
	case err != nil:
		badRequest(w, "the body could not be read")
		return false
	}
	if problem := bodyProblem(data, v); problem != "" {
		badRequest(w, problem)
		return false
	}
	return true
}

// bodyProblem decodes data into v, and says what is wrong with it ("" when
// nothing is).
func bodyProblem(data []byte, v any) string {
	if len(bytes.TrimSpace(data)) == 0 {
		return "the body is empty: send a JSON object"
	}
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return fmt.Sprintf("the body is not valid JSON (at byte %d)", syntax.Offset)
		}
		return "the body is not valid JSON"
	}
	names, ok := memberNames(data)
	if !ok {
		return "the body must be a JSON object"
	}
	if problem := checkNames(names, fieldNames(reflect.TypeOf(v).Elem())); problem != "" {
		return problem
	}
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(data, v); errors.As(err, &typeErr) {
		return fmt.Sprintf("%s must be %s", lastName(typeErr.Field), kindName(typeErr.Type))
	} else if err != nil {
		return "the body does not decode"
	}
	return ""
}

// memberNames returns the member names of the JSON object data, in order;
// false when data (valid JSON) is not an object.
func memberNames(data []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		names = append(names, tok.(string)) // a member name: data is valid JSON
		if err := dec.Decode(new(json.RawMessage)); err != nil {
			return nil, false
		}
	}
	return names, true
}

// checkNames refuses a member the API does not know, and a member given
// twice (also in another case, which Go's decoder would read as one).
func checkNames(names []string, known map[string]bool) string {
	seen := map[string]string{}
	for _, name := range names {
		if !known[name] {
			return fmt.Sprintf("%q is not a field of this request (fields: %s)", name, strings.Join(sortedKeys(known), ", "))
		}
		folded := strings.ToLower(name)
		if _, dup := seen[folded]; dup {
			return fmt.Sprintf("%s is given more than once", name)
		}
		seen[folded] = name
	}
	return ""
}

// fieldNames returns the JSON names of the fields of the struct type t,
// embedded structs' included.
func fieldNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			for name := range fieldNames(f.Type) {
				names[name] = true
			}
		case tag != "":
			names[tag] = true
		case f.IsExported():
			names[f.Name] = true
		}
	}
	return names
}

// lastName is the JSON name of the field a decoding error names
// ("amountBody.amount_cents" gives "amount_cents").
func lastName(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[i+1:]
	}
	if field == "" {
		return "the body"
	}
	return field
}

// kindName says what a value of type t must be, in JSON's terms.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return kindName(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
