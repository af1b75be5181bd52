// com.atproto.server.reserveSigningKey: a fresh secp256k1 key held for a DID that may
// move here; a second reservation for the DID replaces the first.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { reserveSigningKey } from '../../../../account/import-account.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.reserveSigningKey<AuthFor<'com.atproto.server.reserveSigningKey'>>(async ({ auth, input }) => {
    const did = auth.credentials.type === 'access' ? auth.credentials.did : input.body?.did
    if (!did) throw xrpcError('InvalidRequest', 'did is required without authentication')
    const signingKey = await reserveSigningKey(db, did)
    return { encoding: 'application/json', body: { signingKey } }
  })
