// Package docs holds no code. Its tests check claims that docs/*.md make
// about the tree, so a document cannot drift from the code it describes:
// requirements.md's totals are computed from its rows and those of
// requirements-issues.md, and every test and path a row names must exist.
package docs
