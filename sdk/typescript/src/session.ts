// A run as a resource: `await using run = await paddock.bootstrap(…)`
// rejects the run when the block ends unless its change set was submitted,
// so that an orchestrator that throws half-way leaves no live run behind.

import type { Paddock } from "./client.js";
import { isPaddockError } from "./errors.js";
import type { Run } from "./types.js";

export class RunSession implements AsyncDisposable {
  /** The run as bootstrap (or the caller) gave it. */
  readonly run: Run;
  /** The run's own bearer token (from bootstrap; shown once), if it has one here. */
  readonly token: string | undefined;
  /**
   * A client for the run's agent: with the run's token, it reaches only
   * that run's agent-side routes, as the agent would; without one, the
   * operator's client marked as the agent's.
   */
  readonly agent: Paddock;
  readonly #operator: Paddock;
  #kept = false;

  constructor(operator: Paddock, run: Run, token?: string) {
    this.#operator = operator;
    this.run = run;
    this.token = token;
    this.agent = token ? operator.withToken(token) : operator.forAgent();
  }

  /** The run's id. */
  get id(): string {
    return this.run.id!;
  }

  /** Keep the run as it is when the session ends, submitted or not. */
  keep(): void {
    this.#kept = true;
  }

  /**
   * Ends the session: the run is rejected unless its change set was
   * submitted (it has a review state), the session was kept, or it is
   * gone already. Called by `await using`.
   */
  async close(): Promise<void> {
    if (this.#kept) return;
    try {
      const run = await this.#operator.runs.get(this.id);
      if (run.review || run.removed_at) return;
      await this.#operator.runs.reject(this.id);
    } catch (err) {
      // Gone, or already past where a reject applies: nothing to undo.
      if (isPaddockError(err, "not_found") || isPaddockError(err, "conflict")) return;
      throw err;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
