// Loaded before pglite-socket's server (node --import): what the engine must never run.
//
// The engine runs PostgreSQL in WebAssembly on one thread, for every client at once. A COPY
// to or from a program waits forever for a program WebAssembly cannot start, and from then on
// the engine answers no one (measured: COPY (SELECT 1) TO PROGRAM 'cat'). Each query and each
// prepared statement a client sends is read here first, its comments and quoted text left
// out (a message may say "copy the program"), and such a statement is replaced by one that
// fails with a sentence, so the client gets an error and the engine goes on.
import { PGlite } from "@electric-sql/pglite";

const REFUSED =
  "the embedded engine runs no program (COPY ... TO PROGRAM or FROM PROGRAM would stop it for every " +
  "client): write to a file, or use a PostgreSQL server";

// The statement's words outside comments, quoted text and dollar-quoted bodies.
function words(sql) {
  let out = "";
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i];
    const d = sql[i + 1];
    if (c === "-" && d === "-") {
      const j = sql.indexOf("\n", i);
      i = j < 0 ? n : j;
      out += " ";
    } else if (c === "/" && d === "*") {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === "/" && sql[i + 1] === "*") {
          depth += 1;
          i += 2;
        } else if (sql[i] === "*" && sql[i + 1] === "/") {
          depth -= 1;
          i += 2;
        } else {
          i += 1;
        }
      }
      out += " ";
    } else if (c === "'" || c === '"') {
      const escapes = c === "'" && /[eE]$/.test(out);
      i += 1;
      while (i < n) {
        if (escapes && sql[i] === "\\") {
          i += 2;
        } else if (sql[i] === c && sql[i + 1] === c) {
          i += 2;
        } else if (sql[i] === c) {
          i += 1;
          break;
        } else {
          i += 1;
        }
      }
      out += " ";
    } else if (c === "$" && !/[A-Za-z0-9_$]$/.test(out)) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const j = sql.indexOf(tag[0], i + tag[0].length);
        i = j < 0 ? n : j + tag[0].length;
        out += " ";
      } else {
        out += c;
        i += 1;
      }
    } else {
      out += c;
      i += 1;
    }
  }
  return out;
}

const WEDGES = /\bCOPY\b[^;]*\bPROGRAM\b/i;
const FAIL = `DO $agefacts$ BEGIN RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', MESSAGE = '${REFUSED}'; END $agefacts$`;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function message(type, body) {
  const out = new Uint8Array(5 + body.length);
  out[0] = type;
  new DataView(out.buffer).setInt32(1, 4 + body.length);
  out.set(body, 5);
  return out;
}

// A Query ('Q': the text) or Parse ('P': a name, the text, the parameters' types) message
// whose text would wedge the engine, as one whose text fails instead; any other unchanged.
export function guarded(raw) {
  const type = raw[0];
  if ((type !== 0x51 && type !== 0x50) || raw.length < 6) return raw;
  let start = 5;
  if (type === 0x50) {
    start = raw.indexOf(0, 5) + 1;
    if (start <= 0) return raw;
  }
  const end = raw.indexOf(0, start);
  if (end < 0) return raw;
  const sql = decoder.decode(raw.subarray(start, end));
  if (!WEDGES.test(words(sql))) return raw;
  const fail = encoder.encode(FAIL);
  const body = new Uint8Array(start - 5 + fail.length + (raw.length - end));
  body.set(raw.subarray(5, start), 0);
  body.set(fail, start - 5);
  body.set(raw.subarray(end), start - 5 + fail.length);
  return message(type, body);
}

const run = PGlite.prototype.execProtocolRawStream;
PGlite.prototype.execProtocolRawStream = function (raw, options) {
  return run.call(this, guarded(raw), options);
};
