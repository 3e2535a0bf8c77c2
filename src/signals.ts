/**
 * The process's stop signals, taken over as early as a module can: imported second by `main.ts` (after
 * the Node version check), before Express, pino and the rest load. Until `main.ts` hands them a handler
 * ({@link onStopSignal}) they are held, not acted on by Node's default (which ends the process at once:
 * exit 143 instead of the drain's 0, and a demo backend already spawned left without its parent;
 * docs/reliability.md fix 132). A signal sent before Node has run this module (while it reads the
 * bundle) still takes the default action.
 */

/** The signals that drain the shim: SIGHUP too (a closed terminal; Node resets it to its default). */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

let handler: ((signal: NodeJS.Signals) => void) | undefined;
const held: NodeJS.Signals[] = [];

for (const signal of STOP_SIGNALS) {
  process.on(signal, () => {
    if (handler === undefined) held.push(signal);
    else handler(signal);
  });
}

/**
 * Hands the stop signals to `stop`, first those that came before (in order), then each as it comes.
 * @param stop Called once per signal, with its name.
 * @throws What `stop` throws for a signal held before the call (the later held ones are then not
 *   handed over); nothing of its own.
 */
export function onStopSignal(stop: (signal: NodeJS.Signals) => void): void {
  handler = stop;
  for (const signal of held.splice(0)) stop(signal);
}
