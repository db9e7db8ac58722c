"""replay_log.py - replays a dm-log-writes log onto a device, one entry at a time, and calls
back at each point where the disk had flushed (a FLUSH entry or a FUA write): the states a
power cut can leave when the disk's volatile cache loses what was not flushed.  Written for
tests/vm/test-write-order.sh from the kernel's description of the log
(Documentation/admin-guide/device-mapper/log-writes.rst, drivers/md/dm-log-writes.c); Debian
packages no replay tool.

The log, in units of its sector size (the super block says which):
  sector 0       super: le64 magic, le64 version (1), le64 entry count, le32 sector size
  then per entry one sector: le64 sector, le64 number of sectors, le64 flags, le64 data
                 length (a MARK's text follows in the same sector), then the entry's
                 sectors of data (none for a DISCARD or a FLUSH)
Entries are logged in the order the disk completed them, a write only once it is no longer
in a cache: replaying up to a FLUSH gives what the disk held when that flush returned.
"""
import os
import struct

MAGIC = 0x6a736677736872
VERSION = 1
FLUSH, FUA, DISCARD, MARK = 1, 2, 4, 8
SUPER = struct.Struct("<QQQI")
ENTRY = struct.Struct("<QQQQ")


class LogError(Exception):
    pass


def replay(log_path, target_path, at_flush, on_write=None):
    """Replays every entry of the log at log_path onto target_path (a device or file of the
    logged device's size, zeroed beforehand); calls at_flush(index, mark) after each FLUSH
    entry and FUA write, mark being the text of the last MARK entry before it, and
    on_write(offset, length) for each write or discard replayed.  Returns (entries, flush
    points)."""
    with open(log_path, "rb") as log, open(target_path, "r+b") as target:
        magic, version, count, sector_size = SUPER.unpack(log.read(SUPER.size))
        if magic != MAGIC or version != VERSION:
            raise LogError("%s: not a dm-log-writes log (magic %#x, version %d)" %
                           (log_path, magic, version))
        pos = sector_size
        points, mark = 0, ""
        for i in range(count):
            log.seek(pos)
            head = log.read(sector_size)
            if len(head) < sector_size:
                raise LogError("%s: entry %d of %d is past the end" % (log_path, i, count))
            sector, nr, flags, data_len = ENTRY.unpack_from(head)
            pos += sector_size
            if flags & MARK:
                mark = head[ENTRY.size:ENTRY.size + data_len].decode(errors="replace")
            size = nr * sector_size
            if size and on_write:
                on_write(sector * sector_size, size)
            if flags & DISCARD:
                target.seek(sector * sector_size)
                target.write(bytes(size))
            elif size:
                log.seek(pos)
                data = log.read(size)
                if len(data) != size:
                    raise LogError("%s: entry %d's data is cut short" % (log_path, i))
                target.seek(sector * sector_size)
                target.write(data)
                pos += size
            if flags & (FLUSH | FUA):
                target.flush()
                os.fsync(target.fileno())
                points += 1
                at_flush(i, mark)
        return count, points
