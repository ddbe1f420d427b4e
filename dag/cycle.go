package dag

// Cycle returns one cycle of a dependency graph as node ids, the first one
// repeated at the end (a -> b -> a), or nil when there is none. deps(i)
// lists the indexes node i depends on; callers leave out what they report
// otherwise (unknown ids, a node depending on itself). Nodes are visited in
// index order and edges in the order deps gives them, so the same graph
// always reports the same cycle.
func Cycle(ids []string, deps func(i int) []int) []string {
	const (
		unseen = iota
		onStack
		done
	)
	state := make([]int, len(ids))
	var stack []int
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = onStack
		stack = append(stack, i)
		for _, j := range deps(i) {
			switch state[j] {
			case onStack:
				start := 0
				for k, s := range stack {
					if s == j {
						start = k
					}
				}
				for _, s := range stack[start:] {
					cycle = append(cycle, ids[s])
				}
				cycle = append(cycle, ids[j])
				return true
			case unseen:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return false
	}
	for i := range ids {
		if state[i] == unseen && visit(i) {
			return cycle
		}
	}
	return nil
}
