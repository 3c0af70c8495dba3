// Package linkbudget holds, in its test, what each executable under cmd/
// may link: the modules it may draw on, and the packages it must not link
// at all, each with the reason. A short-lived CLI pays at every start for
// the packages it links (their initialisation, the pages of code it
// touches), so these rules are the start-up budget of the CLIs, enforced
// with go list instead of kept in comments. The package has no code.
package linkbudget
