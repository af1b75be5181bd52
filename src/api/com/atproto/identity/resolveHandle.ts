// com.atproto.identity.resolveHandle: the DID a handle names (identity/handle-resolver.ts);
// HandleNotFound otherwise.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { xrpcError } from '../../../../errors.js'
import { resolveHandleDid } from '../../../../identity/handle-resolver.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.identity.resolveHandle(async ({ params }) => {
    const did = await resolveHandleDid(db, params.handle.toLowerCase())
    if (!did) throw xrpcError('HandleNotFound', 'Unable to resolve handle')
    return { encoding: 'application/json', body: { did } }
  })
