// com.atproto.identity.resolveHandle: any handle, this server's accounts first, then DNS and the
// well-known file; HandleNotFound when nothing names a DID.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { resolveHandleDid } from '#src/identity/handle-resolver.js'

export default method('com.atproto.identity.resolveHandle', ({ db, outbound, config }) => async ({ params }) => {
  const did = await resolveHandleDid({ db, outbound, config }, params.handle)
  if (!did) throw xrpcError('HandleNotFound', 'Unable to resolve handle')
  return { encoding: 'application/json', body: { did } }
})
