// com.atproto.server.describeServer: what a client needs before it signs up.
import type { Server } from '../../../../generated/server/index.js'
import { inviteCodeRequired } from '../../../../account/creation-policy.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'

export default (api: Server, { config }: Pick<Services, 'config'>) =>
  api.com.atproto.server.describeServer<AuthFor<'com.atproto.server.describeServer'>>(async () => ({
    encoding: 'application/json',
    body: {
      did: config.serviceDid,
      availableUserDomains: config.handleDomains,
      inviteCodeRequired: inviteCodeRequired(config.accountCreation),
      phoneVerificationRequired: false,
      blobUploadLimit: config.blobUploadLimit,
      links: {
        privacyPolicy: config.links.privacyPolicy,
        termsOfService: config.links.termsOfService,
      },
      contact: { email: config.links.contactEmail },
    },
  }))
