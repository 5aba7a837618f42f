package certstore

import (
	"os"
	"syscall"
)

// stamp identifies one version of a file without reading it: a rename
// over the file changes the inode, an in-place write the modification
// time or the size, a moved symbolic link (os.Stat follows it) the inode.
type stamp struct {
	dev, ino  uint64
	mtimeNsec int64
	size      int64
	err       string // the file could not be stat'ed; a change of error is a change
}

func statFile(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{err: err.Error()}
	}
	s := stamp{mtimeNsec: fi.ModTime().UnixNano(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return s
}

// stamps of every file of pairs, certificate then key, in order.
func stamps(pairs []Pair) []stamp {
	out := make([]stamp, 0, 2*len(pairs))
	for _, p := range pairs {
		out = append(out, statFile(p.CertFile), statFile(p.KeyFile))
	}
	return out
}
