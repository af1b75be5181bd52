// com.atproto.identity.signPlcOperation: the email token buys one operation signed
// with this server's rotation key over the latest one.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { signPlcOperation } from '#src/move/plc-operation.js'

export default method(
  'com.atproto.identity.signPlcOperation',
  (deps: Pick<Services, 'db' | 'config' | 'rotationKey' | 'logger' | 'outbound'>) =>
    async ({ auth, input }) => {
      const operation = await signPlcOperation(deps, auth.credentials.account, input.body)
      return { encoding: 'application/json', body: { operation } }
    },
)
