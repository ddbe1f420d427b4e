// Package costs adds up what agents spent, by phase, task, model and skill,
// and holds the budget rules: a warning at 80 % of a budget, and at 100 %
// the budget's action, warn, block or pause. It is pure (no I/O, no Temporal), so
// the workflows that enforce a budget and the views that show spending use
// the same rules and the same wording.
package costs
