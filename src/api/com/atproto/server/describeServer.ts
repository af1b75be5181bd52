// com.atproto.server.describeServer: what a client needs before it signs up.
import { method } from '#src/api/method.js'
import { inviteCodeRequired } from '#src/account/creation-policy.js'

export default method('com.atproto.server.describeServer', ({ config }) => async () => ({
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
