// com.atproto.identity.getRecommendedDidCredentials: what the account's DID document should say
// to be hosted here (used by migration tools before the PLC update).
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { signingKeyDid } from '#src/account/signing-keys.js'

export default method('com.atproto.identity.getRecommendedDidCredentials', ({ db, config, rotationKey }) => async ({ auth }) => {
  const { account } = auth.credentials
  const key = await signingKeyDid(db, account.did)
  if (!key) throw xrpcError('InvalidRequest', 'Account has no signing key')
  return {
    encoding: 'application/json',
    body: {
      rotationKeys: [rotationKey.did()],
      alsoKnownAs: [`at://${account.handle}`],
      verificationMethods: { atproto: key },
      services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: config.publicUrl } },
    },
  }
})
