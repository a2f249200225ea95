// A structured logger that writes what Go's slog text handler writes —
// time=… level=INFO msg=… key=value… — so that a JavaScript worker's log
// reads like uc's own.

const LEVELS = { debug: 0, info: 1, warn: 2, error: 3 };

/** A logfmt value: quoted when it holds a space, a quote, an = or nothing. */
function value(v) {
  const s = v instanceof Error ? v.message : typeof v === "string" ? v : JSON.stringify(v) ?? String(v);
  return s === "" || /[\s"=]/.test(s) ? JSON.stringify(s) : s;
}

/**
 * A logger with debug, info, warn and error(msg, attrs), and with(attrs)
 * for a logger that adds attrs to each line. It writes the lines of level
 * and above to write (stderr by default).
 */
export function newLogger({ level = "info", write = (line) => process.stderr.write(line), attrs = {} } = {}) {
  const min = LEVELS[level] ?? LEVELS.info;
  const log = (lvl) => (msg, more = {}) => {
    if (LEVELS[lvl] < min) return;
    const pairs = Object.entries({ ...attrs, ...more }).filter(([, v]) => v !== undefined);
    write(`time=${new Date().toISOString()} level=${lvl.toUpperCase()} msg=${value(msg)}${pairs.map(([k, v]) => ` ${k}=${value(v)}`).join("")}\n`);
  };
  return {
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    with: (more) => newLogger({ level, write, attrs: { ...attrs, ...more } }),
  };
}
