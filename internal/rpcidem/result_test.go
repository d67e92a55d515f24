package rpcidem

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestResultRoundTrip(t *testing.T) {
	msg, err := structpb.NewStruct(map[string]any{"id": "p1"})
	require.NoError(t, err)
	res := &Result{
		Header:  map[string][]string{"x-a": {"1", "2"}},
		Trailer: map[string][]string{"x-b": {""}},
	}
	require.NoError(t, res.SetMessage(msg))

	got, err := Decode(res.Encode())
	require.NoError(t, err)
	assert.Equal(t, res, got)
	mt, err := got.MessageType()
	require.NoError(t, err)
	back := mt.New().Interface()
	require.NoError(t, proto.Unmarshal(got.Response, back))
	assert.True(t, proto.Equal(msg, back), "decoded %v, want %v", back, msg)
}

func TestResultStatusRoundTrip(t *testing.T) {
	res := &Result{}
	require.NoError(t, res.SetStatus(&spb.Status{Code: 5, Message: "no such payment"}))
	got, err := Decode(res.Encode())
	require.NoError(t, err)
	assert.Nil(t, got.Response)
	st, err := got.DecodeStatus()
	require.NoError(t, err)
	assert.Equal(t, int32(5), st.GetCode())
	assert.Equal(t, "no such payment", st.GetMessage())
}

func TestDecodeCorrupt(t *testing.T) {
	for name, b := range map[string][]byte{
		"not bytes":     {0x08, 0x01},             // field 1, varint
		"short":         {0x0a, 0x05, 'a'},        // field 1, 5 bytes, 1 given
		"entry field 3": {0x22, 0x02, 0x1a, 0x00}, // a header entry with a field 3
		"entry not tag": {0x22, 0x01, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(b)
			assert.ErrorIs(t, err, ErrCorrupt)
		})
	}
	_, err := (&Result{Status: []byte{0xff}}).DecodeStatus()
	assert.ErrorIs(t, err, ErrCorrupt)
}

func TestAllowed(t *testing.T) {
	type md map[string][]string
	got := Allowed(md{"a": {"1"}, "b": {"2"}}, map[string]bool{"a": true})
	assert.Equal(t, md{"a": {"1"}}, got)
	assert.Nil(t, Allowed(md{"b": {"2"}}, map[string]bool{"a": true}))
}
