// com.atproto.identity.signPlcOperation: the email token buys one operation signed
// with this server's rotation key over the latest one.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { signPlcOperation } from '../../../../migration/plc-operation.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'rotationKey' | 'logger' | 'outbound'>) =>
  api.com.atproto.identity.signPlcOperation<AuthFor<'com.atproto.identity.signPlcOperation'>>(async ({ auth, input }) => {
    const operation = await signPlcOperation(deps, auth.credentials.account, input.body)
    return { encoding: 'application/json', body: { operation } }
  })
