package canonical

import "testing"

// BenchmarkValidateRedact pushes example A's events through the whole first
// layer (map, validate, redact) and reports events per second. Run it on
// one core, as make bench does (target: 100,000 events/s):
//
//	go test -run '^$' -bench ValidateRedact -cpu 1 ./canonical/
func BenchmarkValidateRedact(b *testing.B) {
	b.Run("exampleA", func(b *testing.B) {
		evs := readExample(b, "A")
		ctx := exampleContext("A")
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			for _, ev := range evs {
				c, _ := FromConductor(ev, ctx)
				v, _, err := Validate(c)
				if err != nil {
					b.Fatal(err)
				}
				_ = Redact(v)
				n++
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	})
}
