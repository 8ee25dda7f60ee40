/**
 * Small text helpers for the `oncefetch` command: aligned tables, a progress
 * bar, durations. No dependencies.
 *
 * @module
 */

/** Where a command writes. `process` by default; tests may pass their own. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** true when stderr is a terminal (progress bar instead of plain lines) */
  readonly errIsTty: boolean;
}

/** The process's stdout and stderr. */
export const processIo: CliIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  get errIsTty() {
    return process.stderr.isTTY === true;
  },
};

// What a terminal acts on instead of printing: the C0 controls but tab and newline, DEL, and the C1
// controls (U+009B is a CSI to some terminals). ESC starts OSC titles and hyperlinks, screen clears
// and cursor moves; the CLI prints provider-controlled text (stored bodies, reasons, messages).
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * `text` with every terminal control character written as its `\uXXXX` escape, visible and inert
 * (and still valid inside a JSON string). Tab and newline stay.
 *
 * @example
 * ```ts
 * visible('ok\u001b[2J') // 'ok\\u001b[2J'
 * ```
 */
export function visible(text: string): string {
  return text.replace(CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * `io` writing only {@link visible} text: the one place every command's output passes. A leading
 * carriage return on stderr stays (the progress bar redrawn in place); nothing the CLI writes itself
 * uses another control character.
 */
export function terminalSafe(io: CliIo): CliIo {
  return {
    out: (text) => io.out(visible(text)),
    err: (text) => io.err(text.startsWith('\r') ? `\r${visible(text.slice(1))}` : visible(text)),
    get errIsTty() {
      return io.errIsTty;
    },
  };
}

/** Display width of a string: code points, which is right for the text we print. */
function width(text: string): number {
  return [...text].length;
}

function pad(text: string, to: number, align: 'left' | 'right'): string {
  const fill = ' '.repeat(Math.max(0, to - width(text)));
  return align === 'right' ? fill + text : text + fill;
}

/** A table column: header and alignment. */
export interface Column {
  header: string;
  align?: 'left' | 'right';
}

/**
 * An aligned plain-text table with a header rule. Cells are strings already;
 * newlines in cells are replaced by spaces.
 *
 * @example
 * ```ts
 * table([{ header: 'state' }, { header: 'count', align: 'right' }], [['pending', '3']])
 * ```
 */
export function table(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const clean = rows.map((row) => columns.map((_, i) => (row[i] ?? '').replace(/\s*\n\s*/g, ' ')));
  const widths = columns.map((c, i) => Math.max(width(c.header), ...clean.map((row) => width(row[i] ?? ''))));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => pad(cell, widths[i] ?? 0, columns[i]?.align ?? 'left'))
      .join('  ')
      .trimEnd();
  const header = line(columns.map((c) => c.header));
  const rule = widths.map((w) => '─'.repeat(w)).join('  ');
  return [header, rule, ...clean.map(line)].join('\n') + '\n';
}

/** `label  [██████░░░░]  12/50` */
export function progressBar(label: string, done: number, total: number, barWidth = 30): string {
  const share = total <= 0 ? 1 : Math.min(1, done / total);
  const filled = Math.round(share * barWidth);
  return `${label} [${'█'.repeat(filled)}${'░'.repeat(barWidth - filled)}] ${done}/${total}`;
}

/**
 * Reports progress on stderr: a bar redrawn in place on a terminal, otherwise
 * a plain line at every quarter (logs and CI stay readable).
 */
export function createProgress(io: CliIo, label: string, total: number): { tick(done: number): void; done(): void } {
  let lastQuarter = -1;
  let lastDrawAt = 0;
  const draw = (done: number, force: boolean): void => {
    if (io.errIsTty) {
      const now = Date.now();
      if (!force && now - lastDrawAt < 50) return;
      lastDrawAt = now;
      io.err(`\r${progressBar(label, done, total)}`);
      return;
    }
    const quarter = total <= 0 ? 4 : Math.floor((done / total) * 4);
    if (quarter === lastQuarter) return;
    lastQuarter = quarter;
    io.err(`${label}: ${done}/${total}\n`);
  };
  draw(0, true);
  return {
    tick: (done) => draw(done, done >= total),
    done: () => {
      draw(total, true);
      if (io.errIsTty) io.err('\n');
    },
  };
}

/** `1.2 s`, `340 ms`, `3 min`, `2 h`, `5 d`. */
export function duration(ms: number): string {
  const a = Math.abs(ms);
  if (a < 1_000) return `${Math.round(ms)} ms`;
  if (a < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (a < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  if (a < 86_400_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} d`;
}

/** ISO-8601 without milliseconds, or `-`. */
export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '-';
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Pretty JSON with a final newline. */
export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** A titled block: `title` then indented lines. */
export function section(title: string, lines: readonly string[]): string {
  return `${title}\n${lines.map((l) => `  ${l}`).join('\n')}\n`;
}
