// Package dag holds the one graph rule that plans and runs share: finding
// a dependency cycle, named so that a person can break it.
package dag
