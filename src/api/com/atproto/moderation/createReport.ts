// com.atproto.moderation.createReport: forwarded for the reporter to the service an
// `atproto-proxy` header names, else to PDS_REPORT_SERVICE_* (else the moderation service), with
// a service token for this method. A taken-down account may report (its row admits it).
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { xrpcError } from '#src/errors.js'
import { forwardCall } from '#src/proxy/call.js'
import { targetOf } from '#src/proxy/targets.js'

export default method(
  'com.atproto.moderation.createReport',
  (deps: Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>) =>
    async ({ auth, input, req }) => {
      const nsid = 'com.atproto.moderation.createReport'
      const target = await targetOf(nsid, req.headers['atproto-proxy'], deps)
      if (!target) throw xrpcError('InvalidRequest', 'No service configured for com.atproto.moderation.createReport')
      return forwardCall(deps, { target, nsid, iss: auth.credentials.did, body: input.body, headers: req.headers })
    },
)
