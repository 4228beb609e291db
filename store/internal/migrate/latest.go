package migrate

import "io/fs"

// Latest is the version of the last migration in dir of fsys, 0 when
// there is none or they do not load (the stores' own Open reports why).
func Latest(fsys fs.FS, dir string) int {
	ms, err := Load(fsys, dir)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}
