package dag

import (
	"reflect"
	"testing"
)

func TestCycle(t *testing.T) {
	cases := []struct {
		name string
		ids  []string
		deps [][]int
		want []string
	}{
		{"empty", nil, nil, nil},
		{"a chain", []string{"a", "b", "c"}, [][]int{nil, {0}, {1}}, nil},
		{"a diamond", []string{"a", "b", "c", "d"}, [][]int{nil, {0}, {0}, {1, 2}}, nil},
		{"two nodes", []string{"a", "b"}, [][]int{{1}, {0}}, []string{"a", "b", "a"}},
		{"three, reached from a tail", []string{"x", "a", "b", "c"}, [][]int{{1}, {3}, {1}, {2}}, []string{"a", "c", "b", "a"}},
		{"the first of two cycles", []string{"a", "b", "c", "d"}, [][]int{{1}, {0}, {3}, {2}}, []string{"a", "b", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Cycle(c.ids, func(i int) []int { return c.deps[i] })
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Cycle = %v, want %v", got, c.want)
			}
		})
	}
}
