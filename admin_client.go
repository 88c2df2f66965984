package main

import (
	"errors"
	"fmt"
	"time"

	"breakwater/control"
	"breakwater/crawl"
	"breakwater/storage"
)

// adminAPI is what the inspection and control commands need; a running
// crawl answers it over its control socket, otherwise the file does.
type adminAPI interface {
	Status() (*crawl.Status, error)
	Hosts(state string) ([]crawl.HostRow, error)
	Transitions(host string, since time.Time) ([]storage.Transition, error)
	Cases() ([]storage.Case, error)
	Pause(host, reason string) error
	Unpause(host string) error
	ResolveCase(host string) error
}

var (
	_ adminAPI = (*crawl.Admin)(nil)
	_ adminAPI = remoteAdmin{}
)

// openAdmin reaches the crawl running on dbPath, or opens the file when no
// crawl runs. The returned func releases what was opened.
func openAdmin(dbPath string) (adminAPI, func(), error) {
	sock := control.SocketPath(dbPath)
	err := control.Call(sock, "status", nil, nil)
	if err == nil {
		return remoteAdmin{sock: sock}, func() {}, nil
	}
	if !errors.Is(err, control.ErrNoServer) {
		return nil, nil, err
	}
	db, err := openExisting(dbPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (and no crawl answered on %s)", err, sock)
	}
	return crawl.NewOfflineAdmin(db), func() { db.Close() }, nil
}

// remoteAdmin forwards each command to a running crawl.
type remoteAdmin struct{ sock string }

func (r remoteAdmin) call(cmd string, args crawl.AdminArgs, out any) error {
	return control.Call(r.sock, cmd, args, out)
}

func (r remoteAdmin) Status() (*crawl.Status, error) {
	var st crawl.Status
	return &st, r.call("status", crawl.AdminArgs{}, &st)
}

func (r remoteAdmin) Hosts(state string) ([]crawl.HostRow, error) {
	var rows []crawl.HostRow
	return rows, r.call("hosts", crawl.AdminArgs{State: state}, &rows)
}

func (r remoteAdmin) Transitions(host string, since time.Time) ([]storage.Transition, error) {
	var out []storage.Transition
	return out, r.call("transitions", crawl.AdminArgs{Host: host, Since: since}, &out)
}

func (r remoteAdmin) Cases() ([]storage.Case, error) {
	var out []storage.Case
	return out, r.call("cases", crawl.AdminArgs{}, &out)
}

func (r remoteAdmin) Pause(host, reason string) error {
	return r.call("pause", crawl.AdminArgs{Host: host, Reason: reason}, nil)
}

func (r remoteAdmin) Unpause(host string) error {
	return r.call("unpause", crawl.AdminArgs{Host: host}, nil)
}

func (r remoteAdmin) ResolveCase(host string) error {
	return r.call("resolve", crawl.AdminArgs{Host: host}, nil)
}
