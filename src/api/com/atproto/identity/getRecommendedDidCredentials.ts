// com.atproto.identity.getRecommendedDidCredentials: what the account's DID document should say
// to be hosted here (used by migration tools before the PLC update).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { signingKeyDid } from '../../../../account/signing-keys.js'

export default (api: Server, { db, config, rotationKey }: Pick<Services, 'db' | 'config' | 'rotationKey'>) =>
  api.com.atproto.identity.getRecommendedDidCredentials<AuthFor<'com.atproto.identity.getRecommendedDidCredentials'>>(async ({ auth }) => {
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
