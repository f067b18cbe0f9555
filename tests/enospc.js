// A full disk, for the tests: loaded into the embedded engine's Node process with
// NODE_OPTIONS=--require, it makes every write to a file under AGEFACTS_TEST_ENOSPC_DIR fail
// with ENOSPC while the file AGEFACTS_TEST_ENOSPC_FLAG exists, as a full disk does. With
// AGEFACTS_TEST_ENOSPC_ONLY set, only writes to files whose path contains it fail ("pg_wal":
// the write-ahead log alone).
const fs = require('fs');
const flag = process.env.AGEFACTS_TEST_ENOSPC_FLAG;
const dir = process.env.AGEFACTS_TEST_ENOSPC_DIR;
const only = process.env.AGEFACTS_TEST_ENOSPC_ONLY || '';
const paths = new Map();
const open = fs.openSync;
fs.openSync = function (path, ...rest) {
  const fd = open.call(fs, path, ...rest);
  paths.set(fd, String(path));
  return fd;
};
const write = fs.writeSync;
fs.writeSync = function (fd, ...rest) {
  const path = paths.get(fd);
  if (flag && dir && path && path.startsWith(dir) && path.includes(only) && fs.existsSync(flag)) {
    const e = new Error('ENOSPC: no space left on device, write');
    e.code = 'ENOSPC';
    e.errno = -28;
    e.syscall = 'write';
    throw e;
  }
  return write.call(fs, fd, ...rest);
};
