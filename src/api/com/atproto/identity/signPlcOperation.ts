// com.atproto.identity.signPlcOperation: the email token buys one operation signed
// with this server's rotation key over the latest one.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AccessAuth } from '../../../../auth/verifier.js'
import { signPlcOperation } from '../../../../migration/plc-operation.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'rotationKey' | 'logger' | 'outbound'>) =>
  api.com.atproto.identity.signPlcOperation<AccessAuth>(async ({ auth, input }) => {
    const operation = await signPlcOperation(deps, auth.credentials.account, input.body)
    return { encoding: 'application/json', body: { operation } }
  })
