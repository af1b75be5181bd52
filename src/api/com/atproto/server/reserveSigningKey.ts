// com.atproto.server.reserveSigningKey: a fresh secp256k1 key held for a DID that may
// move here; a second reservation for the DID replaces the first.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { reserveSigningKey } from '#src/account/import-account.js'

export default method('com.atproto.server.reserveSigningKey', ({ db }) => async ({ auth, input }) => {
  const did = auth.credentials.type === 'access' ? auth.credentials.did : input.body?.did
  if (!did) throw xrpcError('InvalidRequest', 'did is required without authentication')
  const signingKey = await reserveSigningKey(db, did)
  return { encoding: 'application/json', body: { signingKey } }
})
