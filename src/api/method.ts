// A handler names its method id once: the id gives it the lexicon's parameters, input and output
// and, through the method's registry row, the auth it receives.
import type { Input, MethodHandler, Output, Params, StreamHandler } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import type { AuthFor } from '../auth/verifier.js'
import type { MethodId } from '../auth/registry.js'
import type { MethodTypes } from '../generated/methods.js'

/** a method a handler file may serve: one with a lexicon and a registry row */
export type Served = keyof MethodTypes & MethodId

/** what answers the calls to `M`: a query's or procedure's handler, or a subscription's stream */
export type Handler<M extends Served> = MethodTypes[M] extends { kind: 'subscription'; params: infer P extends Params; output: infer O }
  ? StreamHandler<AuthFor<M>, P, O>
  : MethodTypes[M] extends { params: infer P extends Params; input: infer I extends Input; output: infer O extends Output }
    ? MethodHandler<AuthFor<M>, P, I, O>
    : never

/** a handler file's default export: its method id and how its handler is made from the services */
export type Method<M extends Served = Served> = { readonly id: M; readonly make: (services: Services) => Handler<M> }

/**
 * `export default method('com.atproto.server.getSession', ({ db }) => async ({ auth }) => …)`:
 * `make` destructures the services it needs and returns the handler, which src/api/index.ts mounts
 * with the row's verifier, rate limit and body permissions.
 */
export const method = <M extends Served>(id: M, make: (services: Services) => Handler<M>): Method<M> => ({ id, make })
