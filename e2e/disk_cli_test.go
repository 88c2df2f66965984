package e2e

// Disk trouble: a real crawl whose database or WARC directory runs out of
// space, or turns read-only, stops within seconds with exit 1 and an
// error naming the file and the cause; once the disk is fixed the same
// command resumes and completes, and verifyClean holds after both runs.
// The disks are size-limited tmpfs mounts, so these tests need root (CI
// runs as root) and skip otherwise.

import (
	"breakwater/cli"
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size (as mount's size= takes it, "4m") on
// a new directory, unmounted when the test ends. It skips the test when
// it cannot: not root, or mount refused (a container without the right).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs (CI runs as root)")
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			exec.Command("umount", "-l", dir).Run() // whatever holds it, it must not outlive the test
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// remount changes the options of the tmpfs at dir, e.g. "ro" or "rw".
func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v: %s", dir, opts, err, out)
	}
}

// fillUp writes a file on the file system of dir until only leave bytes
// are free, and returns its path: removing it gives the space back.
func fillUp(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for n := free - leave; n > 0; n -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), n)]); err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// failedWrite runs the crawl, which must stop on a failed write: exit 1
// within seconds of the failure, with a last word naming path (the file
// that could not be written) and cause. It returns the run's stderr.
func failedWrite(t *testing.T, bin string, args []string, path, cause string) string {
	t.Helper()
	p := startProc(t, bin, args...)
	o := p.wait(t, 60*time.Second)
	exited := time.Now()
	stderr := p.stderr.String()
	if o.code != cli.ExitError {
		t.Fatalf("crawl on a failing disk: %+v, want exit %d\n%s", o, cli.ExitError, p.output())
	}
	last := lastWord(stderr)
	if !strings.Contains(last, path) || !strings.Contains(last, cause) {
		t.Errorf("the last word should name %s and %q:\n%s", path, cause, p.output())
	}
	// The first error logged is the failed write (one at the start is
	// told only in the last word): the run must end soon after it, not
	// spin or wait for its fetches to time out.
	at, ok := firstErrorAt(stderr)
	if !ok {
		at = p.started
	}
	if d := exited.Sub(at); d > 5*time.Second {
		t.Errorf("exited %s after the failed write:\n%s", d.Round(time.Millisecond), stderr)
	} else {
		t.Logf("exit %d %s after the failure: %s", o.code, d.Round(time.Millisecond), last)
	}
	if strings.Contains(stderr, "panic") {
		t.Errorf("the crawl panicked:\n%s", stderr)
	}
	return stderr
}

// lastWord is what the program printed last: from its last line that
// starts "breakwater: " (an error may take more than one line) to the end.
func lastWord(stderr string) string {
	if i := strings.LastIndex("\n"+stderr, "\nbreakwater: "); i >= 0 {
		return stderr[i:]
	}
	return ""
}

// firstErrorAt is the time of the first level=ERROR line of a text log.
func firstErrorAt(log string) (time.Time, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "level=ERROR") || !strings.HasPrefix(line, "time=") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		return at, err == nil
	}
	return time.Time{}, false
}

// resumeClean runs the same command again, which must finish the crawl
// with the file and archive clean, every page fetched and archived once.
func resumeClean(t *testing.T, bin string, args []string, db, warcDir string, site *crashSite) {
	t.Helper()
	p := startProc(t, bin, args...)
	if o := p.wait(t, 60*time.Second); !finished(o, p) {
		t.Fatalf("resume once the disk is fixed: %+v\n%s", o, p.output())
	}
	rep := verifyClean(t, db, warcDir)
	res := checkSiteDone(t, db, site)
	if rep != nil {
		want := map[string]int{}
		for u, r := range res {
			if archived(r) {
				want[u] = 1
			}
		}
		archivedOnce(t, rep, want)
	}
}

// TestDiskFullDatabase runs a crawl whose database is on a 4 MiB tmpfs
// with 96 KiB left (a crawl of the site takes 200), its archive elsewhere: a commit fails for want of
// space (the records of its pages already in the WARC file), the crawl
// stops naming the database file, and the file and archive agree on
// what is done. With the space back, the same command completes.
func TestDiskFullDatabase(t *testing.T) {
	t.Parallel() // each has its own disk and site
	disk := mountTmpfs(t, "4m")
	bin := buildBinary(t)
	site := startCrashSite(t, 4, 40, 1, 30, 3)
	db, warcDir := filepath.Join(disk, "crawl.db"), filepath.Join(t.TempDir(), "warc")
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	filler := fillUp(t, disk, 96<<10)
	failedWrite(t, bin, args, db, "no space left on device")
	verifyClean(t, db, warcDir)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	resumeClean(t, bin, args, db, warcDir, site)
}

// TestDiskFullWARC runs a crawl whose WARC directory is on a 4 MiB tmpfs
// with 512 KiB left, its database elsewhere: a record cannot be written,
// the crawl stops naming the WARC file, and the unfinished file is cut
// back to what the database has done.
func TestDiskFullWARC(t *testing.T) {
	t.Parallel() // each has its own disk and site
	disk := mountTmpfs(t, "4m")
	bin := buildBinary(t)
	site := startCrashSite(t, 4, 40, 1, 60, 4)
	db, warcDir := filepath.Join(t.TempDir(), "crawl.db"), filepath.Join(disk, "warc")
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	filler := fillUp(t, disk, 512<<10)
	failedWrite(t, bin, args, warcDir, "no space left on device")
	verifyClean(t, db, warcDir)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	resumeClean(t, bin, args, db, warcDir, site)
}

// TestReadOnlyDisk stops a crawl part way (--max-pages), turns the file
// system of its WARC directory read-only, then that of its database, and
// runs the same command each time: it stops at the first write with exit
// 1 naming the file and "read-only file system", and changes nothing.
// Made writable again, the same command completes.
func TestReadOnlyDisk(t *testing.T) {
	t.Parallel() // each has its own disk and site
	disk := mountTmpfs(t, "64m")
	bin := buildBinary(t)
	site := startCrashSite(t, 2, 20, 1, 10, 5)
	db, warcDir := filepath.Join(disk, "db", "crawl.db"), filepath.Join(disk, "warc")
	if err := os.Mkdir(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	p := startProc(t, bin, append(slicesClone(args), "--max-pages", "20")...)
	if o := p.wait(t, 30*time.Second); o.code != cli.ExitWorkLeft {
		t.Fatalf("first run: %+v, want exit %d\n%s", o, cli.ExitWorkLeft, p.output())
	}
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	remount(t, disk, "ro")
	// Both the database and the archive are on the read-only disk: the
	// database, opened first, is the file named.
	failedWrite(t, bin, args, db, "read-only file system")
	remount(t, disk, "rw")
	if after, _ := os.ReadFile(db); string(after) != string(before) {
		t.Error("a run on a read-only disk changed the database")
	}
	verifyClean(t, db, warcDir)
	resumeClean(t, bin, args, db, warcDir, site)
}

// TestReadOnlyWARCDirectory makes the WARC directory's file system
// read-only between runs, with the database elsewhere: the run opens the
// database, starts fetching and stops at its first record, naming the
// WARC file it could not create.
func TestReadOnlyWARCDirectory(t *testing.T) {
	t.Parallel() // each has its own disk and site
	disk := mountTmpfs(t, "64m")
	bin := buildBinary(t)
	site := startCrashSite(t, 2, 20, 1, 10, 6)
	db, warcDir := filepath.Join(t.TempDir(), "crawl.db"), filepath.Join(disk, "warc")
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	p := startProc(t, bin, append(slicesClone(args), "--max-pages", "20")...)
	if o := p.wait(t, 30*time.Second); o.code != cli.ExitWorkLeft {
		t.Fatalf("first run: %+v, want exit %d\n%s", o, cli.ExitWorkLeft, p.output())
	}
	remount(t, disk, "ro")
	failedWrite(t, bin, args, warcDir, "read-only file system")
	verifyClean(t, db, warcDir)
	remount(t, disk, "rw")
	resumeClean(t, bin, args, db, warcDir, site)
}

// TestWARCDirectoryMadeReadOnlyMidCrawl takes the write permission of
// the WARC directory away while the crawl writes its first file: the file
// fills up and cannot take its final name, and the crawl stops naming it
// rather than begin another (which would leave it unfinished for good:
// the next run finishes only the file the database names). With the
// permission back, the same command finishes it and the crawl. Root
// ignores permissions, so as root the crawl runs as nobody.
func TestWARCDirectoryMadeReadOnlyMidCrawl(t *testing.T) {
	t.Parallel() // each has its own disk and site
	bin := buildBinary(t)
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("", "breakwater-chmod-") // not under t.TempDir(): nobody must reach it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		const nobody = 65534
		cred = &syscall.Credential{Uid: nobody, Gid: nobody}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "breakwater")
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Skipf("cannot hand %s to nobody: %v", dir, err)
		}
	}
	site := startCrashSite(t, 2, 20, 1, 40, 8)
	db, warcDir := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "warc")
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	p := startProcAs(t, cred, bin, args...)
	waitFor(t, 20*time.Second, "the first WARC file", func() bool { return openWARC(warcDir) != "" })
	open := filepath.Join(warcDir, openWARC(warcDir))
	if err := os.Chmod(warcDir, 0o555); err != nil {
		t.Fatal(err)
	}
	o := p.wait(t, 60*time.Second)
	if err := os.Chmod(warcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	last := lastWord(p.stderr.String())
	if o.code != cli.ExitError || !strings.Contains(last, strings.TrimSuffix(open, ".open")) || !strings.Contains(last, "permission denied") {
		t.Fatalf("crawl with its WARC directory read-only: %+v, want exit %d naming %s and the cause\n%s",
			o, cli.ExitError, open, p.output())
	}
	t.Logf("exit %d: %s", o.code, last)
	if names := dirNames(warcDir); len(names) != 1 || names[0] != filepath.Base(open) {
		t.Errorf("WARC directory after the stop: %v, want only %s, left for the next run", names, filepath.Base(open))
	}
	verifyClean(t, db, "")
	p = startProcAs(t, cred, bin, args...)
	if o := p.wait(t, 60*time.Second); !finished(o, p) {
		t.Fatalf("resume with the permission back: %+v\n%s", o, p.output())
	}
	everyPageArchivedOnce(t, db, warcDir, site)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// moveContents moves every file of dir into to, created if missing: a
// user moving an archive to a bigger disk.
func moveContents(t *testing.T, dir, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range dirNames(dir) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// withWARC is args with --warc's value replaced by dir.
func withWARC(args []string, dir string) []string {
	out := slicesClone(args)
	for i := range out {
		if out[i] == "--warc" {
			out[i+1] = dir
		}
	}
	return out
}

// TestDiskFullWARCMovedToABiggerDisk fills a crawl's WARC disk (a 4 MiB
// tmpfs with 512 KiB left) with pages big enough that the fetcher and the
// encoder spool them to files there too (640 KiB, past the spool's 256
// KiB in memory): whichever write fails first, the crawl stops with exit
// 1 naming the directory and the cause, and no page is done without its
// records. The user moves the directory's files to a bigger disk and
// resumes with --warc NEWDIR: the crawl completes, verify --warc NEWDIR
// clean, every page in it once, and no warning of a file gone missing.
func TestDiskFullWARCMovedToABiggerDisk(t *testing.T) {
	t.Parallel() // each has its own disk and site
	disk := mountTmpfs(t, "4m")
	bin := buildBinary(t)
	site := startCrashSite(t, 2, 10, 1, 30, 9)
	site.bulky = append(site.bulky, startBulky(t, 4, 640<<10, 99))
	db, warcDir := filepath.Join(t.TempDir(), "crawl.db"), filepath.Join(disk, "warc")
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	fillUp(t, disk, 512<<10)
	failedWrite(t, bin, args, warcDir, "no space left on device")
	verifyClean(t, db, warcDir)

	bigger := filepath.Join(t.TempDir(), "warc")
	moveContents(t, warcDir, bigger)
	p := startProc(t, bin, withWARC(args, bigger)...)
	if o := p.wait(t, 60*time.Second); !finished(o, p) {
		t.Fatalf("resume with --warc %s: %+v\n%s", bigger, o, p.output())
	}
	t.Logf("resume took %s", time.Since(p.started))
	if strings.Contains(p.stderr.String(), "not in the --warc directory") {
		t.Errorf("the resume warned of a WARC file gone missing:\n%s", p.stderr.String())
	}
	everyPageArchivedOnce(t, db, bigger, site)
}

// TestWARCMovedAfterACrash kills a crawl while it writes a WARC file,
// moves the directory's files elsewhere and resumes with --warc NEWDIR:
// the run finds the unfinished file the database names there, finishes
// it (cut back to what the database accounts for) and completes, verify
// --warc NEWDIR clean, every page in it once.
func TestWARCMovedAfterACrash(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	site := startCrashSite(t, 2, 10, 1, 30, 10)
	db, warcDir := filepath.Join(t.TempDir(), "crawl.db"), filepath.Join(t.TempDir(), "warc")
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")
	p := startProc(t, bin, args...)
	waitFor(t, 20*time.Second, "records in the first WARC file", func() bool {
		info, err := os.Stat(filepath.Join(warcDir, openWARC(warcDir)))
		return openWARC(warcDir) != "" && err == nil && info.Size() > 256<<10
	})
	p.cmd.Process.Kill()
	if o := p.wait(t, 10*time.Second); o.signal != syscall.SIGKILL {
		t.Fatalf("first run: %+v, want it killed\n%s", o, p.output())
	}
	open := openWARC(warcDir)
	if open == "" {
		t.Fatal("the killed run left no unfinished WARC file")
	}
	bigger := filepath.Join(t.TempDir(), "warc")
	moveContents(t, warcDir, bigger)
	p = startProc(t, bin, withWARC(args, bigger)...)
	if o := p.wait(t, 60*time.Second); !finished(o, p) {
		t.Fatalf("resume with --warc %s: %+v\n%s", bigger, o, p.output())
	}
	if _, err := os.Stat(filepath.Join(bigger, strings.TrimSuffix(open, ".open"))); err != nil {
		t.Errorf("the unfinished file was not finished in the new directory: %v", err)
	}
	everyPageArchivedOnce(t, db, bigger, site)
}

// everyPageArchivedOnce checks that the crawl in db is whole and done, and
// that each page it archived is in warcDir exactly once.
func everyPageArchivedOnce(t *testing.T, db, warcDir string, site *crashSite) {
	t.Helper()
	rep := verifyClean(t, db, warcDir)
	want := map[string]int{}
	for u, r := range checkSiteDone(t, db, site) {
		if archived(r) {
			want[u] = 1
		}
	}
	archivedOnce(t, rep, want)
}
