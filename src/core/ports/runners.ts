/**
 * How a runner runs an engine, declared by the runner as plain data (`Runner.mode`): the turn is
 * planned from it (`sessions/plan-turn.ts`), never from the runner's name.
 *
 * `headless`: each turn is one engine process in its structured mode; the turn's argv and
 * environment are its own, and the engine is gone when the turn ends.
 * `interactive`: the engine's TUI, started once for the session with the environment it keeps,
 * each turn delivered into it; it reports through its hooks and its transcript.
 */
export type RunnerMode = 'headless' | 'interactive';
