// Names for the generated schema types (schema.ts, from
// httpapi/openapi.json by openapi-typescript), and helpers that read an
// operation's body and answer types out of it, so that nothing here is
// written twice and nothing can drift from the document.

import type { components, operations } from "./schema.js";

/** Every schema of openapi.json, by name. */
export type Schemas = components["schemas"];

/** The JSON body an operation takes. */
export type BodyOf<O extends keyof operations> = operations[O] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;

type Success<R> = R extends { 200: infer A } ? A : R extends { 201: infer A } ? A : R extends { 202: infer A } ? A : never;

/** What an operation's envelope carries as data on success. */
export type DataOf<O extends keyof operations> = Success<operations[O]["responses"]> extends {
  content: { "application/json": { data?: infer D } };
}
  ? D
  : never;

/** An operation's query parameters. */
export type QueryOf<O extends keyof operations> = operations[O]["parameters"] extends { query?: infer Q } ? NonNullable<Q> : never;

export type AccessRequest = Schemas["AccessRequest"];
export type AccessRequestInput = Schemas["AccessRequestInput"];
export type AgentDefinition = Schemas["AgentDefinition"];
export type BootstrapRequest = Schemas["BootstrapRequest"];
export type Capabilities = Schemas["Capabilities"];
export type ChangeSet = Schemas["ChangeSet"];
export type CreateRunRequest = Schemas["CreateRunRequest"];
export type DaemonStatus = Schemas["DaemonStatus"];
export type Event = Schemas["Event"];
export type ExecRequest = Schemas["ExecRequest"];
export type ExecResult = Schemas["ExecResult"];
export type Flow = Schemas["Flow"];
export type Job = Schemas["Job"];
export type Notice = Schemas["Notice"];
export type Project = Schemas["Project"];
export type QueueEntry = Schemas["QueueEntry"];
export type Run = Schemas["Run"];
export type Submission = Schemas["Submission"];
export type TerminalSize = Schemas["TerminalSize"];
export type VerifyResult = Schemas["VerifyResult"];
