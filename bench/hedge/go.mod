module github.com/idemkit/idem/bench/hedge

go 1.26.0

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/idemkit/idem v0.0.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/idemkit/idem => ../..
