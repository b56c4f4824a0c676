/** Who pays when a credential is used: an API key account, a subscription, or a cloud account. */
export const CREDENTIAL_KINDS = ['api-key', 'subscription', 'cloud'] as const;
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number];
