// com.atproto.identity.resolveHandle: any handle, this server's accounts first, then DNS and the
// well-known file; HandleNotFound when nothing names a DID.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { resolveHandleDid } from '../../../../identity/handle-resolver.js'

export default (api: Server, { db, outbound, config }: Pick<Services, 'db' | 'outbound' | 'config'>) =>
  api.com.atproto.identity.resolveHandle<AuthFor<'com.atproto.identity.resolveHandle'>>(async ({ params }) => {
    const did = await resolveHandleDid({ db, outbound, config }, params.handle)
    if (!did) throw xrpcError('HandleNotFound', 'Unable to resolve handle')
    return { encoding: 'application/json', body: { did } }
  })
