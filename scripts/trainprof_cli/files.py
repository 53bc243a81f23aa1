"""trainprof_cli.files - how the trainprof command creates and reads files.

DESIGN
The command works in folders that others may write: a job's run folder on a
shared project or scratch file system, a folder of traces copied from a
cluster.  Anyone who can write there can plant a symbolic link where the
command will create a file, or put a FIFO, a device or a huge file where it
will read one.  So every file the command creates goes through `create`,
and every file it reads through `open_regular` / `read_regular`; nothing in
scripts/trainprof or scripts/trainprof_cli/ calls open() on a path itself.

Creating.  The file is written under a new name beside its final one,
PATH.<pid>.<12 random hex digits>.tmp, opened with O_CREAT|O_EXCL|
O_NOFOLLOW: O_EXCL fails on any existing name, a planted symbolic link
included (open(2): "O_EXCL ... symbolic links are not followed"), so no
existing file is ever written through, and the random part makes the name
impossible to plant ahead (a name that exists anyway is skipped for another
one).  Once written it is flushed, fsync'ed, and renamed onto PATH: rename(2)
replaces a symbolic link at PATH, it never writes through it, and a reader
sees the old file or the whole new one.  On any failure (an exception,
KeyboardInterrupt and SystemExit included) the temporary file is removed.

Reading.  open_regular opens with O_NONBLOCK (opening a FIFO then returns at
once instead of waiting for a writer) and, for paths met while walking a
folder, O_NOFOLLOW (the library never writes a symbolic link in its
folders), then refuses anything fstat does not call a regular file: a FIFO,
a socket, /dev/zero.  read_regular reads at most a bound and refuses a
larger file, so that a file of unbounded content (a /proc file says size 0)
cannot exhaust memory.  Every refusal is a FileError whose text is one line
naming the path.  Python standard library only.
"""

import errno
import os
import stat

TMP_TRIES = 16                  # fresh random names tried before giving up


class FileError(Exception):
    """A file the command will not read or cannot create; str() is one line
    that names it, .errno the system's error number when there is one."""

    def __init__(self, msg, err=None):
        Exception.__init__(self, msg)
        self.errno = err


def tmp_name(path):
    """A temporary name beside `path`: unique per process and unguessable."""
    return "%s.%d.%s.tmp" % (path, os.getpid(), os.urandom(6).hex())


class AtomicFile:
    """A file created at `path` as DESIGN says: write to .f (binary), then
    commit(); abort() (or an exception inside `with`) leaves nothing behind."""

    def __init__(self, path, fsync=True, mode=0o666):
        self.path = path
        self.fsync = fsync
        self.f = None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(TMP_TRIES):
            tmp = tmp_name(path)
            try:
                fd = os.open(tmp, flags, mode)
            except FileExistsError:
                continue                # planted, or a collision: another name
            except OSError as e:
                raise FileError("%s: cannot create %s: %s" % (path, tmp, e.strerror or e))
            self.tmp = tmp
            self.f = os.fdopen(fd, "wb")
            return
        raise FileError("%s: cannot create a temporary file beside it: %d names taken"
                        % (path, TMP_TRIES))

    def commit(self):
        try:
            self.f.flush()
            if self.fsync:
                os.fsync(self.f.fileno())
            self.f.close()
            os.rename(self.tmp, self.path)
        except BaseException as e:
            self.abort()
            if isinstance(e, OSError):
                raise FileError("%s: cannot write it: %s" % (self.path, e.strerror or e))
            raise
        if self.fsync:
            _fsync_dir(os.path.dirname(self.path) or ".")

    def abort(self):
        if self.f is not None and not self.f.closed:
            try:
                self.f.close()
            except OSError:
                pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass

    def __enter__(self):
        return self.f

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.commit()
        else:
            self.abort()
        return False


def create(path, fsync=True):
    """with create(path) as f: f.write(b"...") - the only way the command
    creates a file."""
    return AtomicFile(path, fsync=fsync)


def private_dir(prefix):
    """A new empty folder only this user may enter, in $TMPDIR (or /tmp):
    mkdir(2) with mode 0700 on an unguessable name (tempfile.mkdtemp),
    which fails on any existing name, a planted link included.  The caller
    removes it (os.rmdir)."""
    import tempfile
    return tempfile.mkdtemp(prefix=prefix)


def _fsync_dir(d):
    """Makes the rename durable; best effort (some file systems refuse)."""
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder"))


def open_regular(path, follow=True):
    """(binary file object, os.stat_result) of the regular file at `path`;
    FileError for anything else (a symbolic link too unless `follow`)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise FileError("%s: a symbolic link, not read (the library writes none)" % path)
        raise FileError("%s: cannot open: %s" % (path, e.strerror or e), e.errno)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
            raise FileError("%s: %s, not a regular file: not read" % (path, kind))
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, limit, follow=True):
    """(bytes, os.stat_result): the whole regular file at `path`, at most
    `limit` bytes (FileError when larger)."""
    f, st = open_regular(path, follow)
    parts, total = [], 0
    # sized by the file (read(limit + 1) would allocate the whole bound at
    # every call: 4,096 summary.json files took twice as long), then in
    # pieces (a /proc file says size 0)
    n = min(st.st_size + 1, limit + 1) if st.st_size > 0 else 1 << 16
    with f:
        try:
            while total <= limit:
                b = f.read(n)
                if not b:
                    break
                parts.append(b)
                total += len(b)
                if len(b) < n and st.st_size > 0:
                    break               # a regular file's short read: its end
                n = min(1 << 20, limit + 1 - total)
        except OSError as e:
            raise FileError("%s: cannot read: %s" % (path, e.strerror or e))
    data = b"".join(parts)
    if len(data) > limit:
        raise FileError("%s: larger than %s: not read" % (path, size_text(limit)))
    return data, st


def size_text(n):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return "%d %s" % (n // k, unit)
    return "%d bytes" % n
