/**
 * The worker processes of a chaos run: started, watched, SIGKILLed and
 * restarted, SIGSTOPped and resumed at the planned points of progress.
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseHistory } from './checker.js';
import type { HistoryEntry, IndeterminateEntry } from './history.js';
import { burstOp, isStrict, ownerOf, type ChaosEvent } from './plan.js';
import type { DoneLine, WorkerConfig } from './protocol.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
/** No call finished for this long: the run is stalled. */
const STALL_MS = 120_000;
/** How long an aimed event waits for its worker's signal (`a`) before it hits all the same. */
const AIM_WAIT_MS = 3_000;
/** How far ahead a burst is set, so that every worker has its line before the moment comes. */
const BURST_LEAD_MS = 40;

interface Slot {
  id: number;
  incarnation: number;
  child: ChildProcess | undefined;
  state: 'running' | 'paused' | 'killing' | 'done';
  stderr: string;
  crashes: number;
  /** delay before the restart, while being killed */
  restartDelayMs: number;
  /** the worker listens for SIGUSR2 (it said `r`, and not yet `x`, its schedule done): it may be armed */
  ready: boolean;
  /** an aimed event armed on this worker (SIGUSR2), waiting for its signal */
  aim?: { hit: () => void; timer: NodeJS.Timeout } | undefined;
}

/** The calls an incarnation started and has not ended, as its history file says. */
function openCalls(historyPath: string, incarnation: number): HistoryEntry[] {
  if (!existsSync(historyPath)) return [];
  const open = new Map<number, HistoryEntry>();
  for (const e of parseHistory(readFileSync(historyPath, 'utf8'))) {
    if (e.type === 'reconciled' || e.incarnation !== incarnation) continue;
    if (e.type === 'invoke') open.set(e.op, e);
    else open.delete(e.op);
  }
  return [...open.values()];
}

/** Appends an `indeterminate` outcome for every call a dead incarnation left without one; returns their refs. */
export function closeOpenCalls(historyPath: string, incarnation: number, code: string): string[] {
  if (!existsSync(historyPath)) return [];
  const text = readFileSync(historyPath, 'utf8');
  // A line torn by the kill (never seen in practice: one small write each) must not swallow the next.
  if (text.length > 0 && !text.endsWith('\n')) appendFileSync(historyPath, '\n');
  const refs: string[] = [];
  for (const e of openCalls(historyPath, incarnation)) {
    if (e.type !== 'invoke') continue;
    const closed: IndeterminateEntry = { type: 'indeterminate', op: e.op, worker: e.worker, incarnation, ref: e.ref, at: Date.now(), code, state: 'unobserved' };
    appendFileSync(historyPath, `${JSON.stringify(closed)}\n`);
    refs.push(e.ref);
  }
  return refs;
}

/** The workers' configuration, but for their id and incarnation. */
export type FleetConfig = Omit<WorkerConfig, 'id' | 'incarnation' | 'historyPath'>;

/** Runs the workers to the end of their schedules, hitting them as planned. */
export class Fleet {
  completed = 0;
  kills = 0;
  pauses = 0;
  /** aimed events that hit as their worker signalled a response in hand / that hit after AIM_WAIT_MS without it */
  aimed = { onSignal: 0, missed: 0 };
  /** planned events that found no running worker */
  skippedEvents = 0;
  readonly errors: string[] = [];
  readonly workerStats: Record<string, number> = {};
  recoveredOnRestart = 0;
  /**
   * Takeovers by the workers' clients (every life, killed ones too), by whose lease they took:
   * an earlier life of the same worker's (`restart`), another owner of the same worker (`sameWorker`),
   * another worker's (`otherWorker`), or none of these (`other`).
   */
  readonly takeovers = { total: 0, restart: 0, sameWorker: 0, otherWorker: 0, other: 0 };
  /** calls that resumed a record still `in_flight` under their own owner name (no takeover: the lease read as theirs) */
  resumedInFlight = 0;
  /** store faults the workers injected, by `<kind>` and by `<kind> <method>` */
  readonly storeFaults: Record<string, number> = {};
  /** key mismatches injected in the workers' answers from the provider that dedupes, by what they replaced (`replay`, `in_progress`) */
  readonly keyMismatch: Record<string, number> = {};
  /** how the key conflicts on a resend that the workers' calls got ended in those calls, by branch (see `conflict-branches.ts`) */
  readonly conflictBranches: Record<string, number> = {};
  /** refs burst so far (each at most once), in order: burst n's calls are operation `burstOp(plan, n)` */
  readonly bursts: string[] = [];
  private readonly slots: Slot[];
  private readonly events: ChaosEvent[];
  private lastProgressAt = Date.now();
  private settle: () => void = () => undefined;
  private readonly watchdog: NodeJS.Timeout;
  /** resolves once every worker has finished its schedule (or the run stalled) */
  readonly finished: Promise<void>;

  constructor(
    private readonly config: FleetConfig,
    private readonly runDir: string,
    events: readonly ChaosEvent[],
    private readonly log: (line: string) => void,
  ) {
    this.events = [...events];
    this.slots = Array.from({ length: config.plan.workers }, (_, id) => ({ id, incarnation: 0, child: undefined, state: 'running', stderr: '', crashes: 0, restartDelayMs: 0, ready: false }));
    this.finished = new Promise<void>((resolve) => (this.settle = resolve));
    this.watchdog = setInterval(() => this.checkStall(), 2_000);
    for (const slot of this.slots) this.spawn(slot);
  }

  /** The history file of a worker. */
  historyPath(id: number): string {
    return join(this.runDir, `history-w${id}.jsonl`);
  }

  /** Every worker's history, as written (with the kills' closing entries). */
  history(): HistoryEntry[] {
    return this.slots.flatMap((s) => (existsSync(this.historyPath(s.id)) ? parseHistory(readFileSync(this.historyPath(s.id), 'utf8')) : []));
  }

  /** Kills every worker still alive. */
  stop(): void {
    clearInterval(this.watchdog);
    for (const slot of this.slots) {
      this.disarm(slot, true);
      if (slot.state === 'done') continue;
      slot.state = 'done';
      slot.child?.kill('SIGCONT');
      slot.child?.kill('SIGKILL');
    }
    this.settle();
  }

  /** Kills every worker still alive, as `stop` does, and resolves once each of them has exited. */
  async halt(): Promise<void> {
    const alive = this.slots.flatMap((s) => (s.child?.pid !== undefined && s.child.exitCode === null && s.child.signalCode === null ? [s.child] : []));
    this.stop();
    await Promise.all(alive.map((child) => (child.exitCode === null && child.signalCode === null ? once(child, 'exit') : undefined)));
  }

  private spawn(slot: Slot): void {
    const config: WorkerConfig = { ...this.config, id: slot.id, incarnation: slot.incarnation, historyPath: this.historyPath(slot.id) };
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    // (a burst line written as the worker dies: EPIPE, nothing to do)
    child.stdin?.on('error', () => undefined);
    slot.child = child;
    slot.state = 'running';
    slot.stderr = '';
    slot.ready = false;
    child.stderr?.on('data', (chunk: Buffer) => (slot.stderr = (slot.stderr + chunk.toString()).slice(-4000)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line === 'p') return this.onCompletion();
      if (line === 'r' || line === 'x') {
        if (slot.child === child) slot.ready = line === 'r';
        return;
      }
      if (line === 'a') {
        const aim = slot.aim;
        if (aim === undefined || slot.child !== child) return;
        this.aimed.onSignal++;
        this.disarm(slot);
        return aim.hit();
      }
      if (line.startsWith('c ')) return this.burst(line.slice(2), BURST_LEAD_MS);
      if (line.startsWith('t ')) return this.countTakeover(slot, line.slice(2));
      if (line === 'u') return void this.resumedInFlight++;
      if (line.startsWith('k ')) {
        const instead = line.slice(2);
        this.keyMismatch[instead] = (this.keyMismatch[instead] ?? 0) + 1;
        return;
      }
      if (line.startsWith('b ')) {
        const branch = line.slice(2);
        this.conflictBranches[branch] = (this.conflictBranches[branch] ?? 0) + 1;
        return;
      }
      if (line.startsWith('f ')) {
        const [kind = '?', method = '?'] = line.slice(2).split(' ');
        for (const k of [kind, `${kind} ${method}`]) this.storeFaults[k] = (this.storeFaults[k] ?? 0) + 1;
        return;
      }
      try {
        const done = JSON.parse(line) as DoneLine;
        for (const [k, v] of Object.entries(done.stats)) this.workerStats[k] = (this.workerStats[k] ?? 0) + v;
        this.recoveredOnRestart += done.recovered;
      } catch {
        slot.stderr += `(stdout) ${line}\n`;
      }
    });
    child.once('close', (code, signal) => this.onClose(slot, code, signal));
  }

  private countTakeover(slot: Slot, previousOwner: string): void {
    this.takeovers.total++;
    const prev = ownerOf(previousOwner);
    if (prev === undefined) this.takeovers.other++;
    else if (prev.worker !== slot.id) this.takeovers.otherWorker++;
    else if (prev.life !== undefined && prev.life < slot.incarnation) this.takeovers.restart++;
    else this.takeovers.sameWorker++;
  }

  private onCompletion(): void {
    this.completed++;
    this.lastProgressAt = Date.now();
    const { ops } = this.config.plan;
    if (this.completed % Math.max(1, Math.floor(ops / 10)) === 0) {
      this.log(`[chaos] ${this.completed}/${ops} calls done, ${this.kills} kills, ${this.pauses} pauses`);
    }
    while (this.events[0] !== undefined && this.events[0].afterCompletions <= this.completed) this.fire(this.events.shift()!);
  }

  private onClose(slot: Slot, code: number | null, signal: NodeJS.Signals | null): void {
    this.disarm(slot, true);
    if (slot.state === 'done') return;
    if (slot.state === 'killing') {
      // The killed calls' records stay `in_flight` until their lease runs out: then a burst races to take them over.
      const cut = closeOpenCalls(this.historyPath(slot.id), slot.incarnation, 'KILLED');
      for (const ref of cut) if (isStrict(ref)) this.burst(ref, this.config.timing.leaseMs + BURST_LEAD_MS);
      slot.incarnation++;
      setTimeout(() => {
        if (slot.state === 'killing') this.spawn(slot);
      }, slot.restartDelayMs);
      return;
    }
    if (code !== 0) {
      this.errors.push(`worker w${slot.id} (incarnation ${slot.incarnation}) exited with ${code ?? signal}: ${slot.stderr.trim().slice(-1500)}`);
      closeOpenCalls(this.historyPath(slot.id), slot.incarnation, 'CRASHED');
      slot.incarnation++;
      if (++slot.crashes <= 3) return this.spawn(slot);
    }
    slot.state = 'done';
    if (this.slots.every((s) => s.state === 'done')) {
      clearInterval(this.watchdog);
      this.settle();
    }
  }

  /**
   * Has every live worker call `ref` (of the provider that ignores keys) at the same moment, `inMs`
   * from now: `c <ref> <op> <at>` on their stdin (see the worker). At most once per ref.
   */
  private burst(ref: string, inMs: number): void {
    if (this.bursts.includes(ref)) return;
    const op = burstOp(this.config.plan, this.bursts.length);
    this.bursts.push(ref);
    const line = `c ${ref} ${op} ${Date.now() + inMs}\n`;
    for (const slot of this.slots) {
      const stdin = slot.child?.stdin;
      if ((slot.state === 'running' || slot.state === 'paused') && stdin?.writable === true) stdin.write(line);
    }
  }

  /** The planned worker if it is running, else the next running one. */
  private pick(preferred: number): Slot | undefined {
    for (let i = 0; i < this.slots.length; i++) {
      const slot = this.slots[(preferred + i) % this.slots.length]!;
      if (slot.state === 'running' && slot.child !== undefined && slot.aim === undefined) return slot;
    }
    return undefined;
  }

  /** Drops the aimed event armed on `slot`; `lost`: it will never hit (the worker ended first), counted as skipped. */
  private disarm(slot: Slot, lost = false): void {
    if (slot.aim === undefined) return;
    clearTimeout(slot.aim.timer);
    slot.aim = undefined;
    if (lost) this.skippedEvents++;
  }

  /**
   * Hits a worker as planned. An aimed event first arms the worker (SIGUSR2): its next send to the
   * provider that ignores keys signals (`a`) when the response is in hand, and holds it a while, so
   * the hit lands after the effect and before the engine records it. No signal within AIM_WAIT_MS:
   * it hits all the same, as it does a worker still starting (not `ready`).
   */
  private fire(event: ChaosEvent): void {
    const slot = this.pick(event.worker);
    if (slot === undefined) return void this.skippedEvents++;
    const child = slot.child;
    if (!event.aimed) return this.hit(slot, child, event);
    if (!slot.ready) {
      // (still starting: a SIGUSR2 now would end it)
      this.aimed.missed++;
      return this.hit(slot, child, event);
    }
    const hit = (): void => {
      if (slot.state === 'running' && slot.child === child) this.hit(slot, child, event);
      else this.skippedEvents++;
    };
    const timer = setTimeout(() => {
      this.aimed.missed++;
      this.disarm(slot);
      hit();
    }, AIM_WAIT_MS);
    slot.aim = { hit, timer };
    child?.kill('SIGUSR2');
  }

  private hit(slot: Slot, child: ChildProcess | undefined, event: ChaosEvent): void {
    if (event.kind === 'kill') {
      this.kills++;
      slot.state = 'killing';
      slot.restartDelayMs = event.restartDelayMs;
      child?.kill('SIGKILL');
      return;
    }
    this.pauses++;
    slot.state = 'paused';
    child?.kill('SIGSTOP');
    // Its calls' leases run out while it is stopped: a burst races to take their records over.
    for (const e of openCalls(this.historyPath(slot.id), slot.incarnation)) if (isStrict(e.ref)) this.burst(e.ref, this.config.timing.leaseMs + BURST_LEAD_MS);
    setTimeout(() => {
      if (slot.state !== 'paused' || slot.child !== child) return;
      slot.state = 'running';
      child?.kill('SIGCONT');
    }, event.pauseMs);
  }

  private checkStall(): void {
    if (Date.now() - this.lastProgressAt < STALL_MS) return;
    this.errors.push(`no call finished for ${STALL_MS / 1000} s (${this.completed}/${this.config.plan.ops} done): stalled`);
    this.stop();
  }
}
